"""The executor: a block planned for concrete feed shapes into generated Python.

`runner.BlockRunner` plans a block once per feed signature (`analysis`: shapes, constants,
dead ops; `buffers`: preallocated temporaries reused by liveness; `codegen`: one line per
kernel call) into a frozen `record.Plan` (its function, what its kernels share, its call
under the thread policy), kept by `cache.PlanCache`; `family` groups the plans of every
batch size (the kernels they share, `.plans`); `failures` names the op a failing
call stopped at; `entry` generates a method's call entry (argument checks, reader
batches, locking), `feed` converts and checks call arguments, and `sources` registers
generated source with linecache. Nothing here knows about the live program that owns a
plan.
"""
