"""Trains forever as far as the engine can tell: an allreduce every few ms. Every rank
reports its pid and host once, then its step now and then (run with
TFMPI_ALL_RANKS_OUTPUT=1 under tfmpirun)."""
import os
import socket
import time

import numpy as np

import tfmpi

tfmpi.init()
grad = np.ones(4096, np.float32)
print(f"rank {tfmpi.rank()} pid {os.getpid()} host {socket.gethostname()}", flush=True)
step = 0
while True:
    tfmpi.allreduce(grad, op="average", name="grad")
    if step % 200 == 0:
        print(f"rank {tfmpi.rank()} step {step}", flush=True)
    step += 1
    time.sleep(0.005)
