"""The remote-shell agent that Open MPI (and the harness) use to run a command on a host.

Called as ssh would be, `agent [OPTIONS] [USER@]HOST COMMAND...`, it
  1. moves its own shell into the host's cgroups (this has to happen before entering the
     namespace: `ip netns exec` remounts /sys without the cgroup hierarchies);
  2. execs `ip netns exec NS`, mounts the CPU controller's hierarchy again in that private
     /sys (as a container or batch job sees its own limits: a rank can read its host's
     quota), [`unshare --uts`, sets the host name], then
     `env -i HOME=... PATH=... USER=... LOGNAME=... SHELL=/bin/sh sh -c "COMMAND..."`:
     the command starts with a clean environment, as over ssh, so a variable that would
     not reach a remote rank on a real cluster does not reach it here either.
Every step execs, so the pid Open MPI sees is the remote command's (its daemon's).
"""

import os
import pwd
import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class AgentHost:
    names: tuple  # names the host answers to: its address first
    netns: str
    procs_files: tuple  # cgroup.procs files to write the agent's pid to
    hostname: str = ""  # own host name (UTS namespace); empty: keep the machine's


def clean_environment(path):
    """What sshd gives a command: HOME, PATH, USER, LOGNAME, SHELL (and nothing else)."""
    user = pwd.getpwuid(os.geteuid())
    return {"HOME": user.pw_dir, "PATH": path, "USER": user.pw_name,
            "LOGNAME": user.pw_name, "SHELL": "/bin/sh"}


def agent_script(hosts, tools, env, run_name="", cgroup_mount=""):
    """Text of the agent (a POSIX sh script). `tools` maps ip, env and (for host names)
    unshare and hostname to absolute paths; `env` is the clean environment;
    `cgroup_mount`: shell commands that mount the CPU controller's hierarchy on
    /sys/fs/cgroup inside the namespace (empty: none)."""
    q = shlex.quote
    env_words = " ".join(q(f"{k}={v}") for k, v in env.items())
    cases = []
    for h in hosts:
        pattern = "|".join(q(n) for n in h.names)
        procs = " ".join(h.procs_files)  # cgroup paths have no spaces
        cases.append(f"  {pattern}) ns={q(h.netns)}; name={q(h.hostname)}; procs={q(procs)} ;;")
    uts = ""
    if tools.get("unshare") and tools.get("hostname"):
        uts = (f'if [ -n "$name" ]; then set -- {q(tools["unshare"])} --uts /bin/sh -c '
               f"'{q(tools['hostname'])} \"$0\" && exec \"$@\"' \"$name\" \"$@\"; fi\n")
    mount = ""
    if cgroup_mount:  # best effort: a rank that cannot read its quota treats it as unknown
        inner = "{ " + cgroup_mount + '; } 2>/dev/null; exec "$@"'
        mount = f'set -- /bin/sh -c {q(inner)} sh "$@"\n'
    return f"""#!/bin/sh
# rsh agent of emulated cluster {run_name}: agent [OPTIONS] [USER@]HOST COMMAND...
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiLlmOopQRSWw]) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then echo "usage: $0 [OPTIONS] HOST COMMAND..." >&2; exit 255; fi
host=${{1#*@}}; shift
case "$host" in
{chr(10).join(cases)}
  *) echo "$0: unknown host $host (not in emulated cluster {run_name})" >&2; exit 255 ;;
esac
for f in $procs; do
  echo $$ > "$f" || {{ echo "$0: cannot move into cgroup ($f)" >&2; exit 255; }}
done
cd {q(env["HOME"])} 2>/dev/null || cd /  # where sshd starts a command
command="$*"
set -- {q(tools["env"])} -i {env_words} /bin/sh -c "$command"
{uts}{mount}exec {q(tools["ip"])} netns exec "$ns" "$@"
"""


def write_agent(path, *args, **kwargs):
    with open(path, "w") as f:
        f.write(agent_script(*args, **kwargs))
    os.chmod(path, 0o755)
    return path


def write_hostfile(path, addresses, slots, mpich=False):
    """Open MPI hostfile: one `ADDRESS slots=N` line per host; MPICH: `ADDRESS:N`."""
    with open(path, "w") as f:
        for addr, n in zip(addresses, slots):
            f.write(f"{addr}:{n}\n" if mpich else f"{addr} slots={n}\n")
    return path
