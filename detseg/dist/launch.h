// Implements: `detseg train --nproc N`: N local worker processes of this same executable, each
// with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free
// MASTER_PORT). The launcher waits for them; when one fails it stops the rest and reports which
// rank failed and how. Across machines there is no launcher: run the binary with the variables set.
#pragma once

namespace detseg::dist {

// True in a process this launcher started (it must train, not launch again).
bool is_launched_worker();

// Re-runs this process's own command line (/proc/self/cmdline) as `nproc` workers; returns the
// exit code for the launcher: 0 when all succeed, else the first failing worker's exit status
// (1 when it was killed by a signal). Throws ConfigError when WORLD_SIZE is already set (a
// torchrun-style launch must not also pass --nproc).
int launch_local_workers(int nproc);

// A loopback TCP port nobody listens on at the moment of the call.
int pick_free_port();

// In a launched worker without an explicit --threads, the intra-op thread count the launcher chose
// (cores / nproc); 0 otherwise.
int launched_worker_threads();

}  // namespace detseg::dist
