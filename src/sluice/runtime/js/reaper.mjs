// Child processes of user code in the sandbox. The runner's PID namespace holds only the jail's
// init (1), the runner and what user code started. When no invocation is in flight, those
// leftovers are killed: every child process dies with its invocation (or, for overlapping
// ones, with the last of them).

import { readdirSync, readFileSync } from "node:fs";

/** Kill the jail's other processes when `busy()` is false. */
export function reapIfIdle(busy) {
  if (busy()) return;
  // A process being created as /proc is read can be missed: pass again until nothing but
  // zombies (already dead, waiting to be collected) is left. A killed process is not dead
  // at once: the kernel runs its exit after the signal is sent, so from the second pass each
  // waits a moment for the ones still dying (20 quick passes could all end before a killed
  // sleeper did, and the next invocation saw it alive). Bounded: 50 passes, ~100 ms.
  for (let pass = 0; pass < 50; pass++) {
    const others = jailProcesses();
    if (others.length === 0) return;
    for (const pid of others) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    Atomics.wait(PAUSE, 0, 0, pass === 0 ? 0 : 2);
  }
}

const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/** Live processes of the jail other than its init and this runner. */
function jailProcesses() {
  let names;
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const out = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === 1 || pid === process.pid) continue;
    let stat = "";
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    } catch {
      continue; // gone
    }
    if (!/\) Z /.test(stat)) out.push(pid);
  }
  return out;
}
