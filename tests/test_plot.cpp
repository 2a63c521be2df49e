// Plot scripts and results files without pixels: colours per method, panels per mode, the log-y
// rule, ratio values, pooled attention maps; drawing only where gnuplot is installed.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "attention_plot.h"
#include "eval/eval_report.h"
#include "eval/plot.h"
#include "util/atomic_file.h"
#include "util/gnuplot.h"

using namespace xtrap;
namespace fs = std::filesystem;

namespace {

EvalRow row(const std::string& run, const std::string& pos, int64_t Lvalid, const std::string& mode, double ppl) {
  EvalRow r;
  r.run = run, r.pos = pos, r.arch = "decoder", r.Ltrain = 128, r.Lvalid = Lvalid, r.mode = mode, r.ppl = ppl;
  r.stride = mode == "sliding" ? 64 : Lvalid;
  return r;
}

// The plot clause drawing `label`: "... lc rgb '#xxxxxx' dt D pt P ... title 'label'".
std::smatch lineOf(const std::string& script, const std::string& label) {
  std::smatch m;
  std::regex re("lc rgb '(#[0-9a-f]{6})' dt ([0-9]+) pt ([0-9]+)[^\\n]*title '" + label + "'");
  REQUIRE(std::regex_search(script, m, re));
  return m;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct EnvVar {
  EnvVar(const char* name, const char* value) : name(name) { setenv(name, value, 1); }
  ~EnvVar() { unsetenv(name); }
  const char* name;
};

}  // namespace

TEST_CASE("one fixed colour per position method, all ten distinct") {
  std::set<std::string> seen;
  for (const char* pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "alibi-offset", "alibi-onesided",
                          "alibi-learned", "bialibi"})
    seen.insert(positionColour(pos));
  CHECK(seen.size() == 10);
  CHECK(seen.count("#000000") == 0);
  CHECK(positionColour("alibi") == "#d62728");
  CHECK(positionColour("sinusoidal") == "#1f77b4");
  CHECK(positionColour("no-such-method") == "#000000");
}

TEST_CASE("perplexity plot: a colour per method, variants by dash, one panel per mode, L marked") {
  std::vector<EvalRow> rows;
  for (const char* mode : {"sliding", "nonoverlap"}) {  // sliding first: the nonoverlap panel still leads
    rows.push_back(row("sinusoidal-100", "sinusoidal", 128, mode, 500));
    rows.push_back(row("sinusoidal-100", "sinusoidal", 512, mode, 900));
    rows.push_back(row("sinusoidal-200", "sinusoidal", 128, mode, 520));
    rows.push_back(row("sinusoidal-200", "sinusoidal", 512, mode, 1900));
    rows.push_back(row("alibi", "alibi", 128, mode, 480));
    rows.push_back(row("alibi", "alibi", 512, mode, 470));
  }
  PerplexityScripts s = perplexityPlotScripts(rows, "t");
  CHECK(count(s.ppl, "set multiplot layout 1,2") == 1);
  CHECK(count(s.ppl, "\nplot ") == 2);
  CHECK(s.ppl.find("non-overlapping windows") < s.ppl.find("sliding window, stride 64"));
  auto a = lineOf(s.ppl, "alibi"), s100 = lineOf(s.ppl, "sinusoidal-100 \\(sinusoidal\\)"),
       s200 = lineOf(s.ppl, "sinusoidal-200 \\(sinusoidal\\)");
  CHECK(a[1] == "#d62728");
  CHECK(s100[1] == "#1f77b4");
  CHECK(s200[1] == "#1f77b4");                   // same method, same colour
  CHECK(s100[2] != s200[2]);                     // told apart by dash
  CHECK(s100[3] != s200[3]);                     // and point type
  CHECK(count(s.ppl, "\nset logscale y") == 1);  // 470..1900 spans more than 3x
  CHECK(count(s.ppl, "set arrow from 128, graph 0 to 128, graph 1") == 1);
  CHECK(count(s.ppl, "set yrange") == 1);  // one y range for both panels
  CHECK(count(s.ppl, "unset key") == 1);   // the legend once, inside the first panel
  CHECK(count(s.ppl, "set key inside") == 1);

  // Ratio to Lvalid = L: sinusoidal-200 at 512 is 1900 / 520.
  CHECK(s.ratio.find(fmt::format("512 {:.6g}\n", 1900.0 / 520.0)) != std::string::npos);
  CHECK(s.ratio.find(fmt::format("512 {:.6g}\n", 470.0 / 480.0)) != std::string::npos);
  CHECK(s.ratio.find("ppl(Lvalid) / ppl(L)") != std::string::npos);
  CHECK(ratioPlotPath("out/a.png") == fs::path("out/a-ratio.png"));

  // A narrow range stays linear.
  std::vector<EvalRow> flat = {row("alibi", "alibi", 128, "nonoverlap", 480),
                               row("alibi", "alibi", 512, "nonoverlap", 900)};
  auto f = perplexityPlotScripts(flat, "t");
  CHECK(count(f.ppl, "\nset logscale y") == 0);
  CHECK(count(f.ppl, "set multiplot layout 1,1") == 1);
}

TEST_CASE("results CSV reads back what eval wrote, old headers too, bad files are named") {
  auto dir = fs::temp_directory_path() / "xtrap_test_plot_csv";
  fs::create_directories(dir);
  EvalRow r = row("alibi", "alibi", 256, "sliding", 123.4567);
  r.slopes = "0.5 0.25", r.nll = 4.815, r.tokensScored = 999;
  EvalRow gpu = r;
  gpu.device = "cuda", gpu.peakMemoryMiB = 1536.25;
  writeEvalRows(dir / "r.csv", {r, gpu});
  auto back = readEvalRows(dir / "r.csv");
  REQUIRE(back.size() == 2);
  CHECK(back[0].peakMemoryMiB == -1);                            // not measured: an empty field
  CHECK(back[1].peakMemoryMiB == Approx(1536.2).margin(0.051));  // written with one decimal
  CHECK(back[1].device == "cuda");
  CHECK(back[0].run == "alibi");
  CHECK(back[0].slopes == "0.5 0.25");
  CHECK(back[0].Lvalid == 256);
  CHECK(back[0].stride == 64);
  CHECK(back[0].ppl == Approx(123.4567));
  CHECK(back[0].tokensScored == 999);
  writeTextAtomically(dir / "old.csv",
                      "run,arch,pos,L_train,Lvalid,split,mode,stride,interp,scale,slopes,tokens_scored,nll,ppl,seconds,"
                      "tokens_per_s\nnone,decoder,none,128,512,valid,nonoverlap,512,none,1,\"\",10,6.5,665.1,1.0,10\n");
  auto old = readEvalRows(dir / "old.csv");
  REQUIRE(old.size() == 1);
  CHECK(old[0].ppl == Approx(665.1));
  CHECK(old[0].peakMemoryMiB == -1);
  writeTextAtomically(dir / "bad.csv", "a,b\n1,2\n");
  CHECK_THROWS_WITH(readEvalRows(dir / "bad.csv"), Catch::Contains("no column 'run'"));
  writeTextAtomically(dir / "short.csv", "run,pos,L_train,Lvalid,mode,interp,ppl\nx,alibi,1,2,nonoverlap,none\n");
  CHECK_THROWS_WITH(readEvalRows(dir / "short.csv"), Catch::Contains("short.csv:2"));
  fs::remove_all(dir);
}

TEST_CASE("attention picture script: masked cells blank, slopes in titles, uniform reference") {
  RunPicture run;
  run.label = "alibi-run", run.pos = "alibi", run.Ltrain = 2, run.N = 4, run.cells = 2, run.causal = true;
  HeadPicture h;
  h.layer = 0, h.head = 1, h.slope = 0.25;
  h.map = {0.5f, 0.f, 0.25f, 0.25f};  // row 0: keys 0-1 / 2-3 (all masked)
  h.meanDistance = {0.f, 0.5f, 1.f, 1.5f};
  run.heads = {h};
  AttentionScripts s = attentionPlotScripts({run, run});
  CHECK(s.heatmaps.find("$m0_0 << EOD\n0.5 NaN\n0.25 0.25\nEOD") != std::string::npos);
  CHECK(s.heatmaps.find("alibi  L0 H1  m=0.25") != std::string::npos);
  CHECK(s.heatmaps.find("rows: alibi = alibi-run") != std::string::npos);  // the runs, in the figure title
  CHECK(s.heatmaps.find("set logscale cb") != std::string::npos);
  CHECK(count(s.heatmaps, "set multiplot layout 2,1") == 1);  // two runs, one layer each, one head
  CHECK(s.distance.find("$d1_0 << EOD\n0 0\n1 0.5\n2 1\n3 1.5\nEOD") != std::string::npos);
  CHECK(count(s.distance, "set multiplot layout 1,2") == 1);
  CHECK(count(s.distance, "x/2 with lines") == 2);  // causal uniform attention: i / 2
  CHECK(distancePlotPath("a/b.png") == fs::path("a/b-distance.png"));
  CHECK(poolStart(1, 10, 3) == 3);
  CHECK(poolStart(3, 10, 3) == 10);
}

TEST_CASE("a missing plotter is PlotterMissing, with gnuplot the PNGs appear") {
  auto dir = fs::temp_directory_path() / "xtrap_test_plot_draw";
  fs::create_directories(dir);
  std::vector<EvalRow> rows = {row("alibi", "alibi", 128, "nonoverlap", 480),
                               row("alibi", "alibi", 256, "nonoverlap", 470)};
  {
    EnvVar missing("XTRAP_GNUPLOT", "/nonexistent/gnuplot");
    CHECK_FALSE(gnuplotAvailable());
    CHECK_THROWS_AS(plotPerplexity(dir / "p.png", rows, "t"), PlotterMissing);
    CHECK_FALSE(fs::exists(dir / "p.png"));
  }
  if (!gnuplotAvailable()) {
    WARN("gnuplot not installed: drawing not checked");
  } else {
    plotPerplexity(dir / "p.png", rows, "t");
    CHECK(fs::file_size(dir / "p.png") > 1000);
    CHECK(fs::file_size(dir / "p-ratio.png") > 1000);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);  // no temporaries left
  }
  fs::remove_all(dir);
}
