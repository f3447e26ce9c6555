"""DESIGN §1's fit_a_line as a script, for the distributed tests: it trains from a RecordIO
file until the data ends, then infers one sample. Run plainly it trains in one process;
with ``--distributed main=train_step`` its ``Compile()`` returns the trainer's or serves as
a parameter server (``TRAINING_ROLE``).

Settings from the environment (tests only): FIT_DATA (the RecordIO file), FIT_OUT (a
checkpoint directory trainer 0 writes at the end), FIT_STEP_SLEEP (seconds to sleep
after each step, to give a test time to act mid-training) and FIT_HANG (a trainer id:
that trainer hangs after training instead of ending, as a script stuck outside a step)."""
import os
import time

import fluid


class FitALine(fluid.Program):
    DEFAULT_READER_FILE_PATH = os.environ.get("FIT_DATA", "./data.recordio")
    batch_size = 16

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(file=self.DEFAULT_READER_FILE_PATH,
                                    batch_size=self.batch_size,
                                    shape=[[13], [1]], dtype=['float32', 'float32'],
                                    format='recordio')
        x, y = reader.next_item()
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost, name='avg_cost')
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


def main():
    fit_a_line = FitALine().Compile(seed=0)
    pause = float(os.environ.get("FIT_STEP_SLEEP", "0"))
    steps, loss = 0, float("nan")
    while True:
        try:
            loss = fit_a_line.train_step()
        except fluid.EOFException:
            break
        steps += 1
        if steps % 10 == 0:
            print(f"step {steps} loss {loss:.5f}", flush=True)
        time.sleep(pause)
    y = fit_a_line.infer([3, 4, 6, 3, 5, 7, 8, 6, 5, 4, 1, 5, 8])
    print(f"trained {steps} steps, last loss {loss:.5f}, infer {float(y[0][0]):.5f}",
          flush=True)
    out = os.environ.get("FIT_OUT")
    me = os.environ.get("PADDLE_TRAINER_ID", "0")
    if out and me == "0":
        fit_a_line.save(out)
    if os.environ.get("FIT_HANG") == me:
        print("hanging", flush=True)
        time.sleep(3600)


if __name__ == "__main__":
    main()
