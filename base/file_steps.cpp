#include "file_steps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

#include "environment.h"
#include "error.h"

namespace sf::file_steps {

namespace {

enum class Action { none, list, kill, interrupt, stop, disk_full, power_loss };

struct Plan {
  Action action = Action::none;
  long long at = 0;  // the step after which `action` happens
  long long done = 0;
};

Plan read_plan() {
  Plan plan;
  const char* text = environment::value("SCRATCHFORMER_FILE_STEPS");
  if (!text || !*text) return plan;
  std::string_view value = text;
  if (value == "list") {
    plan.action = Action::list;
    return plan;
  }
  for (auto [name, action] : {std::pair{"KILL:", Action::kill}, std::pair{"INT:", Action::interrupt},
                              std::pair{"STOP:", Action::stop}, std::pair{"ENOSPC:", Action::disk_full},
                              std::pair{"POWER:", Action::power_loss}}) {
    if (!value.starts_with(name)) continue;
    const char* number = text + std::string_view(name).size();
    char* end = nullptr;
    plan.at = std::strtoll(number, &end, 10);
    if (end == number || end != text + value.size() || plan.at < 0) break;
    plan.action = action;
    return plan;
  }
  internal_fail("SCRATCHFORMER_FILE_STEPS: expected list, KILL:N, INT:N, STOP:N, ENOSPC:N or POWER:N, got '", value,
                "'");
}

Plan& plan() {
  static Plan p = read_plan();
  return p;
}

bool losing_power() { return plan().action == Action::power_loss; }

// What a power loss takes away (POWER:N). The model is the POSIX guarantee,
// as ext4 gives it:
//  - a file's data is on the disk only up to its last fsync: what was written
//    since is lost (a file never fsynced loses all of it);
//  - a change of a folder's names (a new file or folder, a link, a rename, an
//    unlink) is on the disk only once the folder itself is fsynced: until then
//    the old names come back, and a new folder goes with all that is in it.
// A process killed by SIGKILL keeps both (they are in the page cache), so a
// kill test cannot tell a missing fsync; this one can. What a process finds
// on the disk when it starts counts as synced.

// A file or a folder, as the kernel knows it.
struct Inode {
  dev_t device = 0;
  ino_t number = 0;
  bool operator==(const Inode&) const = default;
};

Inode inode_of(const struct stat& s) { return {s.st_dev, s.st_ino}; }

Inode folder_of(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  struct stat s {};
  if (::stat(folder.empty() ? "." : folder.c_str(), &s) != 0)
    internal_fail("SCRATCHFORMER_FILE_STEPS=POWER: cannot stat the folder of ", path);
  return inode_of(s);
}

// A file written since its last fsync. The shim writes files front to back
// (or appends), so what a power loss keeps is a prefix: the file is cut back
// to its size at the last fsync. `fd` is a duplicate of the writer's, so that
// the file can be cut back after the writer closed it, or after its last name
// went.
struct UnsyncedData {
  Inode file;
  off_t synced_size = 0;
  int fd = -1;
};

// A change of a folder's names not yet fsynced, and how to undo it: the name
// it added is removed (or, for a rename, moved back), and the file it
// replaced or removed, kept reachable under a side name in the same folder
// (a hard link made before the step), is put back. A rename counts as a
// change of its target's folder (the program renames only within a folder).
struct UnsyncedName {
  Inode folder;
  std::string added, renamed_from;  // renamed_from: "" unless the step was a rename
  std::string kept, replaced;       // kept: "" unless the step replaced or removed a file
};

UnsyncedName name_added(const std::string& name) { return {{}, name, "", "", ""}; }
UnsyncedName name_renamed(const std::string& from, const std::string& to, const std::string& kept) {
  return {{}, to, from, kept, to};
}
UnsyncedName name_removed(const std::string& name, const std::string& kept) { return {{}, "", "", kept, name}; }

std::vector<UnsyncedData>& unsynced_data() {
  static std::vector<UnsyncedData> files;
  return files;
}

std::vector<UnsyncedName>& unsynced_names() {
  static std::vector<UnsyncedName> changes;
  return changes;
}

// The file behind `fd` is about to be written; `emptied`: by create, which
// leaves nothing synced. Data there before the first write since an fsync was
// synced.
void note_write(int fd, bool emptied) {
  struct stat s {};
  if (::fstat(fd, &s) != 0) return;  // the write itself will fail
  for (UnsyncedData& d : unsynced_data())
    if (d.file == inode_of(s)) {
      if (emptied) d.synced_size = 0;
      return;
    }
  unsynced_data().push_back({inode_of(s), emptied ? 0 : s.st_size, ::dup(fd)});
}

// A hard link to `path` under a new side name in its folder ("" when there is
// no file at `path`), so that the file stays reachable once `path` is
// replaced or removed.
std::string keep_reachable(const std::string& path) {
  static long long count = 0;
  std::string side = (std::filesystem::path(path).parent_path() /
                      (".power-loss-kept-" + std::to_string(::getpid()) + "-" + std::to_string(++count)))
                         .string();
  if (::link(path.c_str(), side.c_str()) == 0) return side;
  if (errno != ENOENT) internal_fail("SCRATCHFORMER_FILE_STEPS=POWER: cannot link ", path, " to ", side);
  return "";
}

// Records a change of names in the folder of `path`, made by a step (`made`),
// or, when the step failed, drops the side name kept for it.
void note_name_change(bool made, const std::string& path, UnsyncedName change) {
  if (!made) {
    if (!change.kept.empty()) ::unlink(change.kept.c_str());
    return;
  }
  change.folder = folder_of(path);
  unsynced_names().push_back(std::move(change));
}

// An fsync: of a file, its data is synced; of a folder, its names.
void note_sync(int fd) {
  struct stat s {};
  if (::fstat(fd, &s) != 0) return;
  if (S_ISDIR(s.st_mode)) {
    std::erase_if(unsynced_names(), [&](const UnsyncedName& change) {
      if (change.folder != inode_of(s)) return false;
      if (!change.kept.empty()) ::unlink(change.kept.c_str());
      return true;
    });
  } else {
    std::erase_if(unsynced_data(), [&](const UnsyncedData& d) {
      if (d.file != inode_of(s)) return false;
      ::close(d.fd);
      return true;
    });
  }
}

// The power goes: what was not synced is undone, the last change first.
void lose_unsynced() {
  std::error_code ignored;  // the process is killed next: nothing to tell
  for (const UnsyncedData& d : unsynced_data())
    if (::ftruncate(d.fd, d.synced_size) != 0) std::perror("SCRATCHFORMER_FILE_STEPS=POWER: ftruncate");
  for (auto change = unsynced_names().rbegin(); change != unsynced_names().rend(); ++change) {
    if (!change->renamed_from.empty())
      ::rename(change->added.c_str(), change->renamed_from.c_str());
    else if (!change->added.empty())
      std::filesystem::remove_all(change->added, ignored);  // a file, or a folder and what it holds
    if (!change->kept.empty()) ::rename(change->kept.c_str(), change->replaced.c_str());
  }
}

// Counts the step just made and does what the plan says there; errno is kept.
void after(const char* what, const std::string& path) {
  Plan& p = plan();
  if (p.action == Action::none) return;
  int saved_errno = errno;
  ++p.done;
  if (p.action == Action::list) std::fprintf(stderr, "file step %lld: %s %s\n", p.done, what, path.c_str());
  if (p.done == p.at) {
    if (p.action == Action::kill) ::raise(SIGKILL);
    if (p.action == Action::interrupt) ::raise(SIGINT);
    if (p.action == Action::stop) ::raise(SIGSTOP);
    if (p.action == Action::power_loss) {
      lose_unsynced();
      ::raise(SIGKILL);
    }
  }
  errno = saved_errno;
}

}  // namespace

int create(const std::string& path) {
  bool new_name = losing_power() && ::access(path.c_str(), F_OK) != 0;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0 && losing_power()) note_write(fd, /*emptied=*/true);
  if (new_name) note_name_change(fd >= 0, path, name_added(path));
  after("create", path);
  return fd;
}

ssize_t write(int fd, const void* data, size_t bytes, const std::string& path) {
  const Plan& p = plan();
  ssize_t n;
  if (p.action == Action::disk_full && p.done >= p.at) {
    errno = ENOSPC;
    n = -1;
  } else {
    if (losing_power()) note_write(fd, /*emptied=*/false);
    n = ::write(fd, data, bytes);
  }
  after("write", path);
  return n;
}

int fsync(int fd, const std::string& path) {
  int result = ::fsync(fd);
  if (result == 0 && losing_power()) note_sync(fd);
  after("fsync", path);
  return result;
}

int link(const std::string& from, const std::string& to) {
  int result = ::link(from.c_str(), to.c_str());
  if (losing_power()) note_name_change(result == 0, to, name_added(to));
  after("link", to);
  return result;
}

int rename(const std::string& from, const std::string& to) {
  std::string kept = losing_power() ? keep_reachable(to) : "";
  int result = ::rename(from.c_str(), to.c_str());
  if (losing_power()) note_name_change(result == 0, to, name_renamed(from, to, kept));
  after("rename", to);
  return result;
}

int unlink(const std::string& path) {
  std::string kept = losing_power() ? keep_reachable(path) : "";
  int result = ::unlink(path.c_str());
  if (losing_power()) note_name_change(result == 0, path, name_removed(path, kept));
  after("unlink", path);
  return result;
}

int make_folder(const std::string& path) {
  int result = ::mkdir(path.c_str(), 0755);
  if (losing_power()) note_name_change(result == 0, path, name_added(path));
  after("mkdir", path);
  return result;
}

}  // namespace sf::file_steps
