// What the library asks of the operating system beyond POSIX and the C++
// library, in one place: each function is a Linux call, with the macOS or
// portable POSIX way of doing the same beside it (platform.cpp). Nothing
// outside this file calls the Linux-only interface it stands for.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace sf::platform {

// Sends `signal` to this process when its parent process ends (and at once
// if it already has): a rank of an MPI job must not train on as an orphan
// of a mpirun that ended without a word to it.
void signal_when_parent_ends(int signal);

// Waits, up to `timeout`, while *word (in memory that several processes may
// share) holds `expected`. It may return early, spuriously or on a signal:
// the caller tests again. wake_all_waiters wakes every waiter on `word`, in
// any process.
void wait_while_equal(uint32_t* word, uint32_t expected, std::chrono::nanoseconds timeout);
void wake_all_waiters(uint32_t* word);

// Asks for the state of the AMX tile registers, which Linux gives a process
// only on request; whether it was granted (never where there is no AMX).
bool request_amx_tiles();

// Whether this CPU has the Arm BF16 extension (BFDOT, BFMMLA: Armv8.6-A,
// Apple M2 on, Neoverse V1 on), as the operating system reports it: Linux's
// HWCAP2_BF16, macOS's hw.optional.arm.FEAT_BF16. False on other machines.
bool arm_bf16_instructions();

// How many cores this process may run on (taskset or mpirun may have bound
// it to some), or 0 where that is not known: a process on macOS is not bound.
int cores_allowed();

// The machine's physical memory in bytes, or 0 if it cannot be told.
double physical_memory_bytes();

// Has the C library return every freed block of `bytes` or more to the system
// at once (glibc's malloc); elsewhere nothing.
void return_freed_blocks_from(size_t bytes);

}  // namespace sf::platform
