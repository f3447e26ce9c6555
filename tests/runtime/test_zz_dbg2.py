import gc, sys, tracemalloc, collections
import numpy as np
from runtime.test_history import Net, call_cost

def test_dbg(rng):
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-1.0], [0.5], [2.0]], np.float32)).astype(np.float32)
    prog = Net().Compile(seed=0)
    per_call = call_cost(prog)
    prog.keep_history(memory=30 * per_call)
    prog.train_step(x, y)
    gc.collect()
    tracemalloc.start(3)
    base = tracemalloc.get_traced_memory()[0]
    held = []
    for step in range(1, 10_001):
        prog.train_step(x, y)
        if step % 1000 == 0:
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0] - base)
            if step == 1000:
                snap0 = tracemalloc.take_snapshot()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    print(held)
    for s in snap1.compare_to(snap0, "lineno")[:6]:
        print(s)
    line = [t for t in snap1.traces if t.traceback[-1].lineno == 19 and "train_step" in t.traceback[-1].filename]
    print(collections.Counter(t.size for t in line).most_common(10))
