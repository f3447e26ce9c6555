"""recommender_system: Paddle 1.8's book test of the same name (user and movie features,
their cosine similarity scaled to a rating) as a `fluid.Program`, on synthetic ratings.

    python examples/book/recommender_system.py [--steps N]

The network is the book's: the user's id (embedding of 32), gender, age and job
(embeddings of 16), each through an fc, concatenated and an fc of 200 (tanh); the movie's
id (embedding of 32 and an fc), its categories (embeddings of 32 summed by
`sequence_pool`) and its title (embeddings of 32 through `nets.sequence_conv_pool`: 32
filters of 3 words, tanh, sum), concatenated and an fc of 200 (tanh); `cos_sim` of the
two scaled by 5 is the predicted score, square_error_cost against the rating, SGD(0.2) on
batches of 256. The tables are the sizes of MovieLens-1M's (6040 users, 3952 movies,
7 age groups, 21 jobs, 18 categories, a title vocabulary of about 5,200 words).

Categories and titles are sequences: Paddle's LoD tensors become padded id batches
``[B, T, 1]`` with their lengths ``[B]`` (the arguments ``category_len`` and
``title_len``). Ratings follow from hidden user and movie factors, so the loss has a
pattern to learn.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from book_common import command_line, id_sequences, train

import fluid

layers, nets = fluid.layers, fluid.nets
USERS, MOVIES, AGES, JOBS, CATEGORIES, TITLE_WORDS = 6041, 3953, 7, 21, 18, 5175
FEEDS = ("user_id", "gender_id", "age_id", "job_id", "movie_id", "category_id",
         "category_len", "movie_title", "title_len")


def ids(name: str):
    return layers.data(name=name, shape=[1], dtype="int64")


def sequence(name: str):
    """A padded id sequence [B, T, 1] and its lengths [B]."""
    seq = layers.data(name=name, shape=[-1, -1, 1], dtype="int64", append_batch_size=False)
    length = layers.data(name={"category_id": "category_len", "movie_title": "title_len"}[name],
                         shape=[-1], dtype="int64", append_batch_size=False)
    return seq, length


class RecommenderSystem(fluid.Program):
    is_sparse = True
    learning_rate = 0.2

    def embedded_fc(self, name, size, table, emb_size):
        emb = layers.embedding(input=ids(name), dtype="float32", size=[size, emb_size],
                               param_attr=table, is_sparse=self.is_sparse)
        return layers.fc(input=emb, size=emb_size)

    def usr_combined_features(self):
        usr_fc = self.embedded_fc("user_id", USERS, "user_table", 32)
        usr_gender_fc = self.embedded_fc("gender_id", 2, "gender_table", 16)
        usr_age_fc = self.embedded_fc("age_id", AGES, "age_table", 16)
        usr_job_fc = self.embedded_fc("job_id", JOBS, "job_table", 16)
        concat_embed = layers.concat(input=[usr_fc, usr_gender_fc, usr_age_fc, usr_job_fc],
                                     axis=1)
        return layers.fc(input=concat_embed, size=200, act="tanh")

    def mov_combined_features(self):
        mov_fc = self.embedded_fc("movie_id", MOVIES, "movie_table", 32)
        category_id, category_len = sequence("category_id")
        mov_categories_emb = layers.embedding(input=category_id, size=[CATEGORIES, 32],
                                              is_sparse=self.is_sparse)
        mov_categories_hidden = layers.sequence_pool(input=mov_categories_emb,
                                                     pool_type="sum", lengths=category_len)
        mov_title_id, title_len = sequence("movie_title")
        mov_title_emb = layers.embedding(input=mov_title_id, size=[TITLE_WORDS, 32],
                                         is_sparse=self.is_sparse)
        mov_title_conv = nets.sequence_conv_pool(input=mov_title_emb, num_filters=32,
                                                 filter_size=3, act="tanh", pool_type="sum",
                                                 lengths=title_len)
        concat_embed = layers.concat(input=[mov_fc, mov_categories_hidden, mov_title_conv],
                                     axis=1)
        return layers.fc(input=concat_embed, size=200, act="tanh")

    def model(self):
        """The book's model(): the scaled similarity, [B, 1]."""
        with fluid.var_scope("recommender"):
            usr = self.usr_combined_features()
            mov = self.mov_combined_features()
        inference = layers.cos_sim(X=usr, Y=mov)
        return layers.scale(x=inference, scale=5.0)

    @fluid.network(*FEEDS, "score")
    def train_step(self, *args):
        scale_infer = self.model()
        label = layers.data(name="score", shape=[1], dtype="float32")
        square_cost = layers.square_error_cost(input=scale_infer, label=label)
        avg_cost = layers.mean(square_cost)
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(avg_cost)
        return avg_cost

    @fluid.network(*FEEDS)
    def infer(self, *args):
        return self.model()


def batches(seed: int, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    """Users and movies drawn at random with their features; the rating (1 to 5) is set by
    how well a hidden 4-number taste of the user (fixed by its id) matches the movie's."""
    taste_u = np.random.default_rng(11).standard_normal((USERS, 4))
    taste_m = np.random.default_rng(12).standard_normal((MOVIES, 4))
    rng = np.random.default_rng(seed)
    while True:
        user, movie = rng.integers(1, 200, batch_size), rng.integers(1, 200, batch_size)
        match = np.sum(taste_u[user] * taste_m[movie], axis=1) / 4
        score = np.clip(np.round(3 + 2 * np.tanh(match)), 1, 5)
        category, category_len = id_sequences(rng, batch_size, CATEGORIES, 1, 4)
        title, title_len = id_sequences(rng, batch_size, TITLE_WORDS, 1, 8)
        columns = [user, user % 2, user % AGES, user % JOBS, movie]
        batch = {n: c.reshape(-1, 1).astype(np.int64) for n, c in zip(FEEDS, columns)}
        batch.update(category_id=category, category_len=category_len, movie_title=title,
                     title_len=title_len, score=score.reshape(-1, 1).astype(np.float32))
        yield batch


def main(steps: int = 30, batch_size: int = 256, seed: int = 0) -> list[float]:
    """Train ``steps`` steps; return the losses."""
    prog = RecommenderSystem().Compile(seed=seed)
    return train(prog.train_step, batches(seed, batch_size), steps, every=5)


if __name__ == "__main__":
    args = command_line(__doc__, steps=30)
    main(args.steps, seed=args.seed)
