"""A Sequence (Keras 3's PyDataset) with a ragged last batch, then an endless
Python generator with steps_per_epoch (epochs cut across its passes)."""

from small_data import keras, write, x, y


def batch(i):  # 192 rows in batches of 40: the fifth one holds 32
    return x[40 * i:40 * (i + 1)], y[40 * i:40 * (i + 1)]


class Batches(keras.utils.Sequence):  # Keras 3: PyDataset
    def __init__(self):
        super().__init__()

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return batch(i)


def endless():
    while True:
        for i in range(5):
            yield batch(i)


model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse")
loss = model.fit(Batches(), epochs=2, verbose=0).history["loss"]
loss += model.fit(endless(), steps_per_epoch=3, epochs=3, verbose=0).history["loss"]
loss.append(model.evaluate(Batches(), verbose=0))
write(loss, model)
