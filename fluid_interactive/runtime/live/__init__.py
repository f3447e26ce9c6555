"""The live object `Compile()` returns, and what it is made of: the `Scope`, the compiled
methods and their entries, the history of changes with rewind and recompile, watching, and
checkpoints. It runs blocks through `runtime.plan`, which never imports it."""
