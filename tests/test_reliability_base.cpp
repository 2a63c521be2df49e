// Torch-free reliability pieces: corpus text checks, the checkpoint container, the token cache
// reader on damaged input, temporary-file hygiene, the interrupt flag, and issue 27's run lock,
// PNG check, data digest and address-space check.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/text_checks.h"
#include "data/token_cache.h"
#include "data/wikitext.h"
#include "error_of.h"
#include "eval/lvalid_range.h"
#include "run/checkpoint_file.h"
#include "run/data_digest.h"
#include "run/run_directory.h"
#include "run/run_lock.h"
#include "util/address_space.h"
#include "util/atomic_file.h"
#include "util/gnuplot.h"
#include "util/interrupt.h"

using namespace xtrap;
using test::errorOf;
namespace fs = std::filesystem;

namespace {
fs::path freshDir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("xtrap-rel-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("firstInvalidUtf8 accepts UTF-8 and finds the first bad byte", "[reliability]") {
  CHECK(firstInvalidUtf8("plain ascii") == std::string_view::npos);
  CHECK(firstInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == std::string_view::npos);  // é € 😀
  CHECK(firstInvalidUtf8("ab\xFFz") == 2);                                                         // never valid
  CHECK(firstInvalidUtf8("a\x80") == 1);             // lone continuation byte
  CHECK(firstInvalidUtf8("\xC0\xAF") == 0);          // overlong '/'
  CHECK(firstInvalidUtf8("x\xE0\x80\xAF") == 1);     // overlong 3-byte
  CHECK(firstInvalidUtf8("\xED\xA0\x80") == 0);      // UTF-16 surrogate
  CHECK(firstInvalidUtf8("\xF4\x90\x80\x80") == 0);  // above U+10FFFF
  CHECK(firstInvalidUtf8("ok\xE2\x82") == 2);        // sequence cut by the end of the text
}

TEST_CASE("checkCorpusText names the file, line and byte", "[reliability]") {
  CHECK_NOTHROW(checkCorpusText("a b\nc d\n", "f"));
  CHECK(errorOf([] { checkCorpusText("good\nbad \xFF\n", "wiki.train.tokens"); }) ==
        "wiki.train.tokens: invalid UTF-8 at line 2, byte offset 9 (0xFF)");
  std::string longLine = "short\n" + std::string(kMaxLineBytes + 1, 'x') + "\n";
  CHECK(errorOf([&] { checkCorpusText(longLine, "f"); }) == "f: line 2 is " + std::to_string(kMaxLineBytes + 1) +
                                                                " bytes long (limit " + std::to_string(kMaxLineBytes) +
                                                                ")");
  CHECK_NOTHROW(checkCorpusText(std::string(kMaxLineBytes, 'x'), "f"));
}

TEST_CASE("checkpoint container round-trips and rejects damage", "[reliability]") {
  std::string payload = "PK\x03\x04 some archive bytes";
  std::string framed = frameCheckpoint(payload);
  CHECK(unframeCheckpoint(framed, "c.pt") == payload);
  CHECK(framed.size() == payload.size() + 28);

  CHECK(errorOf([&] { unframeCheckpoint(framed.substr(0, framed.size() - 3), "c.pt"); }) ==
        "truncated checkpoint c.pt: " + std::to_string(payload.size() - 3) + " of " + std::to_string(payload.size()) +
            " payload bytes");
  CHECK(errorOf([&] { unframeCheckpoint(framed.substr(0, 20), "c.pt"); }) ==
        "truncated checkpoint (incomplete header): c.pt");
  std::string flipped = framed;
  flipped.back() ^= 1;
  CHECK(errorOf([&] { unframeCheckpoint(flipped, "c.pt"); }) == "corrupt checkpoint c.pt: checksum mismatch");
  CHECK(errorOf([&] { unframeCheckpoint(payload, "c.pt"); }) == "not an xtrap checkpoint: c.pt");
  CHECK(errorOf([&] { unframeCheckpoint("", "c.pt"); }) == "not an xtrap checkpoint: c.pt");
  std::string otherVersion = framed;
  otherVersion[8] = 7;
  CHECK(errorOf([&] { unframeCheckpoint(otherVersion, "c.pt"); }) ==
        "checkpoint c.pt has format version 7; this xtrap reads version 2");
  CHECK(errorOf([&] { unframeCheckpoint(framed + "x", "c.pt"); }) ==
        "corrupt checkpoint c.pt: 1 bytes after the payload");
}

TEST_CASE("fnv1a64 matches the published test vectors", "[reliability]") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
}

namespace {
// A cache's bytes for a small corpus, and the stamp it was written with.
Corpus smallCorpus() {
  return Corpus::fromIds(Vocabulary({"<eos>", "the", "cat", "<unk>"}), {1, 2, 0, 1, 3, 0}, {2, 0}, {1, 0});
}
SourceStamp smallStamp() { return {{10, 20, 30}, 77}; }
std::string cacheBytes(const Corpus& c, const SourceStamp& stamp) {
  std::ostringstream out;
  writeTokenCache(out, stamp, c);
  return out.str();
}
std::string readBack(const std::string& bytes, const SourceStamp& stamp, Corpus& back) {
  return readTokenCache(bytes, stamp, payloadOf(bytes), back);
}
}  // namespace

TEST_CASE("token cache reader rejects every truncation and a wrong stamp", "[reliability]") {
  Corpus c = smallCorpus();
  SourceStamp stamp = smallStamp();
  std::string bytes = cacheBytes(c, stamp);
  // Header, "<eos>\0the\0cat\0<unk>\0" padded from 18 to 20 bytes, 10 ids of 4 bytes.
  CHECK(bytes.size() == 104 + 20 + 40);

  Corpus back;
  REQUIRE(readBack(bytes, stamp, back) == "");
  CHECK(back.vocab.words() == c.vocab.words());
  CHECK(back.train == c.train);
  CHECK(back.valid == c.valid);
  CHECK(back.test == c.test);
  CHECK(back.digest == c.digest);

  for (size_t n = 0; n < bytes.size(); ++n) {
    Corpus ignored;
    INFO("prefix " << n);
    CHECK(readBack(bytes.substr(0, n), stamp, ignored).rfind("damaged", 0) == 0);
  }
  SourceStamp otherSize = stamp, otherContent = stamp;
  otherSize.bytes[2] = 31;
  otherContent.contentHash = 78;
  Corpus ignored;
  CHECK(readBack(bytes, otherSize, ignored) == "made from other data");
  CHECK(readBack(bytes, otherContent, ignored) == "made from other data");
}

TEST_CASE("token cache: any flipped payload byte is caught", "[reliability]") {
  std::string bytes = cacheBytes(smallCorpus(), smallStamp());
  for (size_t k = 104; k < bytes.size(); ++k) {
    std::string flipped = bytes;
    flipped[k] = char(flipped[k] ^ 0x10);
    Corpus ignored;
    INFO("byte " << k);
    CHECK(readBack(flipped, smallStamp(), ignored).rfind("damaged", 0) == 0);
  }
}

TEST_CASE("token cache reader survives huge length fields without allocating them", "[reliability]") {
  std::string bytes = cacheBytes(smallCorpus(), smallStamp());
  // vocabBytes at offset 72, then the three split lengths at 80, 88, 96.
  for (size_t field : {72, 80, 88, 96}) {
    std::string damaged = bytes;
    uint64_t huge = uint64_t(1) << 62;
    damaged.replace(field, 8, reinterpret_cast<const char*>(&huge), 8);
    Corpus back;
    INFO("field at " << field);
    CHECK(readBack(damaged, smallStamp(), back).rfind("damaged", 0) == 0);
  }
}

TEST_CASE("temporary files: stale ones are removed, output directories are checked first", "[reliability]") {
  auto dir = freshDir("tmp");
  // PIDs above /proc/sys/kernel/pid_max (at most 2^22) belong to no process.
  std::string mine = "eval.csv.tmp." + std::to_string(::getpid());
  for (std::string name : {"checkpoint.pt.tmp.99999999", "run.json.tmp.88888888", "notes.tmp.txt", "run.json"})
    std::ofstream(dir / name) << "x";
  std::ofstream(dir / mine) << "x";
  removeStaleTemporaries(dir);
  CHECK_FALSE(fs::exists(dir / "checkpoint.pt.tmp.99999999"));
  CHECK_FALSE(fs::exists(dir / "run.json.tmp.88888888"));
  CHECK(fs::exists(dir / mine));  // a live process's temporary
  CHECK(fs::exists(dir / "notes.tmp.txt"));
  CHECK(fs::exists(dir / "run.json"));

  CHECK_NOTHROW(requireWritableDirectoryFor(dir / "out.csv"));
  CHECK(errorOf([&] { requireWritableDirectoryFor(dir / "missing" / "out.csv"); }) ==
        "cannot write " + (dir / "missing" / "out.csv").string() + ": directory " + (dir / "missing").string() +
            " does not exist");
  fs::remove_all(dir);
}

TEST_CASE("a SIGINT is only a flag until a poll point throws Interrupted", "[reliability][signal]") {
  installInterruptHandlers();
  REQUIRE(interruptSignal() == 0);
  std::raise(SIGINT);  // the handler returns: the process keeps running
  CHECK(interruptSignal() == SIGINT);
  {
    DeferInterrupts defer;
    CHECK_NOTHROW(throwIfInterrupted());
  }
  try {
    throwIfInterrupted();
    FAIL("no exception");
  } catch (const Interrupted& e) {
    CHECK(std::string(e.what()) == "interrupted by SIGINT");
    CHECK(e.exitCode() == 130);
  }
}

TEST_CASE("ranks agree on a stop: each stops for its own signal, or SIGTERM for another rank's",
          "[reliability][signal]") {
  CHECK(agreedStopSignal(0, false) == 0);
  CHECK(agreedStopSignal(SIGINT, true) == SIGINT);
  CHECK(agreedStopSignal(SIGTERM, true) == SIGTERM);
  CHECK(agreedStopSignal(0, true) == SIGTERM);
}

TEST_CASE("geometric --Lvalid ranges with a factor just above 1 are rejected, not looped", "[reliability]") {
  // Found by review while writing fuzz_lvalid_range: this used to loop ~1e13 times.
  CHECK(errorOf([] { parseLvalidRange("8..16777216*1.000000000001"); }) ==
        "bad --Lvalid item '8..16777216*1.000000000001': more than 100000 lengths");
  CHECK(errorOf([] { parseLvalidRange("8\xC3\xA9"); }).rfind("bad --Lvalid item", 0) == 0);
  CHECK(parseLvalidRange("100..200*1.5") == std::vector<int64_t>{100, 150, 200});
}

TEST_CASE("one writer per run directory: a second lock names the holder, and is free once released",
          "[reliability][issue27]") {
  auto dir = freshDir("lock");
  {
    RunLock first(dir);
    // flock conflicts between two open files even within one process, as between two processes.
    CHECK(errorOf([&] { RunLock second(dir); }) == "run directory " + dir.string() + " is in use by process " +
                                                       std::to_string(::getpid()) + " (one writer per run)");
  }
  CHECK_NOTHROW(RunLock(dir));
  CHECK(errorOf([&] { RunLock missing(dir / "missing"); }) ==
        "cannot lock run directory " + (dir / "missing").string() + ": No such file or directory");
  fs::remove_all(dir);
}

TEST_CASE("stale temporaries of one output, files or directories, go, live and other ones stay",
          "[reliability][issue27]") {
  auto dir = freshDir("stale-of");
  std::string live = std::to_string(::getpid());
  fs::create_directories(dir / "out.tmp.99999999");  // an export killed before its rename
  std::ofstream(dir / "out.tmp.99999999" / "model.safetensors") << "x";
  for (std::string name : {"a.png.tmp.99999999", "a.png.tmp.99999999.gp", "b.png.tmp.99999999"})
    std::ofstream(dir / name) << "x";
  std::ofstream(dir / ("a.png.tmp." + live)) << "x";
  removeStaleTemporariesOf(dir / "out");
  removeStaleTemporariesOf(dir / "a.png");
  CHECK_FALSE(fs::exists(dir / "out.tmp.99999999"));
  CHECK_FALSE(fs::exists(dir / "a.png.tmp.99999999"));
  CHECK_FALSE(fs::exists(dir / "a.png.tmp.99999999.gp"));
  CHECK(fs::exists(dir / ("a.png.tmp." + live)));  // this process's own
  CHECK(fs::exists(dir / "b.png.tmp.99999999"));   // another output's
  fs::remove_all(dir);
}

TEST_CASE("paths through a file are named as such", "[reliability][issue27]") {
  auto dir = freshDir("through-file");
  std::ofstream(dir / "f") << "x";
  CHECK(fileOnPath(dir / "f" / "a" / "b") == dir / "f");
  CHECK(fileOnPath(dir / "missing" / "a").empty());
  CHECK(errorOf([&] { requireWritableDirectoryFor(dir / "f" / "e.csv"); }) ==
        "cannot write " + (dir / "f" / "e.csv").string() + ": " + (dir / "f").string() + " is not a directory");
  CHECK(errorOf([&] { makeRunDirectory(dir / "f" / "run"); }) == "cannot create run directory " +
                                                                     (dir / "f" / "run").string() + ": " +
                                                                     (dir / "f").string() + " is not a directory");
  fs::remove_all(dir);
}

TEST_CASE("a PNG is complete only with its signature and its IEND chunk", "[reliability][issue27]") {
  auto dir = freshDir("png");
  // A 1x1 grey PNG: signature, IHDR, IDAT, IEND (length 0, type, CRC ae426082).
  const unsigned char png[] = {0x89, 'P',  'N',  'G',  '\r', '\n', 0x1a, '\n', 0,    0,    0,    13,   'I',  'H',
                               'D',  'R',  0,    0,    0,    1,    0,    0,    0,    1,    8,    0,    0,    0,
                               0,    0x3a, 0x7e, 0x9b, 0x55, 0,    0,    0,    10,   'I',  'D',  'A',  'T',  0x78,
                               0x9c, 0x63, 0x60, 0,    0,    0,    2,    0,    1,    0x73, 0x75, 0x01, 0x18, 0,
                               0,    0,    0,    'I',  'E',  'N',  'D',  0xae, 0x42, 0x60, 0x82};
  std::string bytes(reinterpret_cast<const char*>(png), sizeof(png));
  writeTextAtomically(dir / "whole.png", bytes);
  writeTextAtomically(dir / "torn.png", bytes.substr(0, bytes.size() - 5));
  writeTextAtomically(dir / "empty.png", "");
  CHECK(isCompletePng(dir / "whole.png"));
  CHECK_FALSE(isCompletePng(dir / "torn.png"));
  CHECK_FALSE(isCompletePng(dir / "empty.png"));
  CHECK_FALSE(isCompletePng(dir / "missing.png"));
  fs::remove_all(dir);
}

TEST_CASE("the data digest changes with any token and names both digests in its warning", "[reliability][issue27]") {
  auto digest = [](std::vector<int32_t> valid, std::vector<int32_t> test = {2}) {
    return Corpus::fromIds(buildVocabulary("a b c\n"), {0, 1, 2, 3}, std::move(valid), std::move(test)).digest;
  };
  std::string base = digest({0, 1});
  CHECK(base == digest({0, 1}));
  CHECK(base != digest({1, 0}));
  CHECK(base.size() == 8 + 16);
  CHECK(base.rfind("fnv1a64:", 0) == 0);
  // A token moved from one split to the next changes the split lengths, hence the digest.
  CHECK(base != digest({0}, {1, 2}));
  CHECK(dataChangedWarning("r", "d", "", base).empty());  // a run from before the digest
  CHECK(dataChangedWarning("r", "d", base, base).empty());
  CHECK(dataChangedWarning("r", "d", "fnv1a64:0", base) ==
        "the data in d changed since run r was trained (data digest fnv1a64:0 in run.json, " + base + " now)");
}

TEST_CASE("an address-space limit too small for the BLAS buffers is detected, not hung on", "[reliability][issue27]") {
  // In a child: the limit cannot be raised again once lowered.
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::ifstream statm("/proc/self/statm");
    long long pages = 0;
    statm >> pages;
    long long mapped = pages * ::sysconf(_SC_PAGESIZE);
    struct rlimit limit {};
    limit.rlim_cur = limit.rlim_max = rlim_t(mapped + kAddressSpaceReserveBytes + 3 * kBlasBufferBytes / 2);
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(2);
    bool oneFits = addressSpaceShortfall(1).empty();
    std::string two = addressSpaceShortfall(2);
    bool twoRefused = two.rfind("the address-space limit (ulimit -v) of ", 0) == 0 &&
                      two.find("2 BLAS thread(s) need about") != std::string::npos;
    _exit(oneFits && twoRefused ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
