#pragma once
// Every output xtrap writes goes through here: write to a temporary name in the same directory,
// flush + fsync, then rename, so an interrupted write never leaves a file that looks complete.
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

namespace xtrap {

void writeFileAtomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);
void writeTextAtomically(const std::filesystem::path& path, const std::string& text);
std::string readTextFile(const std::filesystem::path& path);  // throws naming the path

// Temporary sibling name used by writeFileAtomically (also for writers that need a path, e.g. HDF5).
std::filesystem::path temporarySibling(const std::filesystem::path& path);
// fsync + rename tmp -> path; throws naming the path on failure (tmp is removed).
void commitTemporary(const std::filesystem::path& tmp, const std::filesystem::path& path);
// The first of `dir` and its ancestors that exists but is not a directory (so `dir` can never
// be one), or an empty path.
std::filesystem::path fileOnPath(const std::filesystem::path& dir);
// Throws "cannot write FILE: ..." unless FILE's directory exists and is writable: commands check
// their outputs before hours of work rather than after.
void requireWritableDirectoryFor(const std::filesystem::path& file);
// Deletes temporaries (files or directories) in `dir` left by a process killed before its commit
// (SIGKILL, power loss); those of processes still running are kept.
void removeStaleTemporaries(const std::filesystem::path& dir);
// The same for the temporaries of one output `path` only (path.tmp.PID...): every writer calls it
// before making its own, so a killed export, probe or plot leaves nothing behind for long.
void removeStaleTemporariesOf(const std::filesystem::path& path);

}  // namespace xtrap
