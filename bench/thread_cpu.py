"""CPU time by thread name for every process a command starts (Linux /proc).

    python bench/thread_cpu.py [--min 0.5] -- tfmpirun -np 2 python examples/resnet50_synthetic.py ...

Samples /proc/<pid>/task/*/stat of the command's descendants every 0.2 s and
prints, per process, the CPU seconds (user + system) of its threads grouped by
name, as last seen before each thread ended. tfmpi's background thread is
named tfmpi-engine; the threads MPI_Init starts (Open MPI's progress and event
threads) carry the process's name.
"""

import argparse
import collections
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def thread_stat(path):
    """(name, ppid, CPU seconds) of a /proc/.../stat file."""
    with open(path) as f:
        text = f.read()
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK  # name, ppid, cpu


def _descendants(root):
    children = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children[thread_stat(f"/proc/{entry}/stat")[1]].append(int(entry))
            except (OSError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min", type=float, default=0.5, help="hide thread groups below this (s)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("no command given")
    proc = subprocess.Popen(command)
    seen = {}  # (pid, process name, tid) -> (thread name, cpu)
    while proc.poll() is None:
        for pid in _descendants(proc.pid):
            try:
                pname = thread_stat(f"/proc/{pid}/stat")[0]
                for tid in os.listdir(f"/proc/{pid}/task"):
                    tname, _, cpu = thread_stat(f"/proc/{pid}/task/{tid}/stat")
                    seen[(pid, pname, tid)] = (tname, cpu)
            except (OSError, ValueError):
                continue
        time.sleep(0.2)
    totals = collections.defaultdict(float)
    for (pid, pname, _), (tname, cpu) in seen.items():
        totals[(pid, pname, tname)] += cpu
    print("\nCPU seconds by process and thread name:", file=sys.stderr)
    for (pid, pname, tname), cpu in sorted(totals.items()):
        if cpu >= a.min:
            print(f"  {pid:>8} {pname:16s} {tname:16s} {cpu:8.2f}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
