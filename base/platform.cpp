// Each system's way, a few lines behind #if: Linux's; macOS's, where it has
// its own; otherwise portable POSIX (or nothing, where nothing is needed).
#include "platform.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#if __has_include(<os/os_sync_wait_on_address.h>)
#include <os/os_sync_wait_on_address.h>
#define SF_HAS_OS_SYNC 1
#endif
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)  // the kernel's arch/arm64 hwcap number, for older C libraries
#endif
#endif

namespace sf::platform {

using namespace std::chrono_literals;

void signal_when_parent_ends(int signal) {
  const pid_t parent = getppid();
#if defined(__linux__)
  prctl(PR_SET_PDEATHSIG, signal);
  if (getppid() != parent) kill(getpid(), signal);  // it ended before prctl
#else
  // No such request: a thread watches. An orphan is adopted (by launchd,
  // init or a subreaper), so its parent's id changes. The thread blocks
  // every signal, which then go to the threads they were meant for.
  std::thread([parent, signal] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    while (getppid() == parent) std::this_thread::sleep_for(100ms);
    kill(getpid(), signal);
  }).detach();
#endif
}

void wait_while_equal(uint32_t* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout <= 0ns) return;
#if defined(__linux__)
  // Not FUTEX_PRIVATE_FLAG: the waker may be another process.
  const timespec relative{time_t(timeout / 1s), long((timeout % 1s).count())};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &relative, nullptr, 0);
#else
#if defined(SF_HAS_OS_SYNC)
  if (__builtin_available(macOS 14.4, *)) {
    os_sync_wait_on_address_with_timeout(word, expected, sizeof *word, OS_SYNC_WAIT_ON_ADDRESS_SHARED,
                                         OS_CLOCK_MACH_ABSOLUTE_TIME, uint64_t(timeout.count()));
    return;
  }
#endif
  // No system call here sleeps on a word: look again after a short sleep.
  if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == expected)
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(timeout, 100us));
#endif
}

void wake_all_waiters(uint32_t* word) {
#if defined(__linux__)
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#elif defined(SF_HAS_OS_SYNC)
  if (__builtin_available(macOS 14.4, *)) os_sync_wake_by_address_all(word, sizeof *word, OS_SYNC_WAKE_BY_ADDRESS_SHARED);
#else
  (void)word;  // the waiters look again on their own
#endif
}

bool request_amx_tiles() {
#if defined(__linux__) && defined(__x86_64__)
  // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16 on
  // (<asm/prctl.h>, the kernel's xstate numbers).
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

bool arm_bf16_instructions() {
#if defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#elif defined(__aarch64__) && defined(__APPLE__)
  int has = 0;
  size_t size = sizeof has;
  return sysctlbyname("hw.optional.arm.FEAT_BF16", &has, &size, nullptr, 0) == 0 && has != 0;
#else
  return false;
#endif
}

int cores_allowed() {
#if defined(__linux__)
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return CPU_COUNT(&allowed);
#endif
  return 0;
}

double physical_memory_bytes() {
#if defined(__APPLE__)
  uint64_t bytes = 0;
  size_t size = sizeof bytes;
  return sysctlbyname("hw.memsize", &bytes, &size, nullptr, 0) == 0 ? double(bytes) : 0;
#else  // Linux, and the BSDs
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? double(pages) * double(page_size) : 0;
#endif
}

void return_freed_blocks_from(size_t bytes) {
#if defined(__GLIBC__)
  // glibc serves large blocks with mmap and gives them back to the system on
  // free, but by default it raises that threshold to the largest block freed
  // so far (up to 32 MiB), after which such blocks come from its heap, where a
  // freed block in the middle stays resident. A fixed threshold keeps "freed"
  // meaning "returned".
  mallopt(M_MMAP_THRESHOLD, int(bytes));
#else
  (void)bytes;  // another C library's own policy stands
#endif
}

}  // namespace sf::platform
