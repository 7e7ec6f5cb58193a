"""steps_per_execution=3 with validation_split and Dropout: 144 training rows
in batches of 32 (calls of 3 and 2 steps, a ragged last batch)."""

from small_data import keras, write, x, y

model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dropout(0.25), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=3)
history = model.fit(x, y, batch_size=32, epochs=2, validation_split=0.25, verbose=0).history
write(history["loss"] + history["val_loss"] + [model.evaluate(x, y, batch_size=40, verbose=0)],
      model)
