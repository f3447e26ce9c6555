"""DOT text for programs, blocks and (later) the trainer/pserver split; SVG when the
graphviz `dot` binary exists. Imports only `ir`."""
