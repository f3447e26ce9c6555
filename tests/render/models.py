"""Real models whose drawings must stay readable: the render tests import them, and the
browser test runs this file's text as a notebook cell."""
import fluid


class MLP3(fluid.Program):
    """A three-layer MLP trained with Adam; ``hidden`` is the second layer's size and
    ``act`` the hidden layers' activation (what the diff tests edit)."""
    hidden = 64
    act = "relu"

    def classifier(self, x):
        with fluid.var_scope("mlp"):
            h = fluid.layers.fc(input=x, size=128, act=self.act)
            h = fluid.layers.fc(input=h, size=self.hidden, act=self.act)
            return fluid.layers.fc(input=h, size=10)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[64], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        logits = self.classifier(x)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(learning_rate=0.001).minimize(loss)
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[64], dtype="float32")
        return self.classifier(x)


class DigitsMLP(fluid.Program):
    """The digits MLP of notebooks/04_distributed.ipynb, to split over 2 trainers and 2
    parameter servers."""

    def classifier(self, image):
        with fluid.var_scope("mlp"):
            h = fluid.layers.fc(input=image, size=128, act="relu")
            h = fluid.layers.fc(input=h, size=64, act="relu")
            return fluid.layers.fc(input=h, size=10)

    @fluid.network("image", "label")
    def train(self, image, label):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            self.classifier(image), label))
        fluid.optimizer.Adam(learning_rate=0.002).minimize(loss)
        return loss

    @fluid.network("image", "label")
    def evaluate(self, image, label):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        return fluid.layers.accuracy(self.classifier(image), label)
