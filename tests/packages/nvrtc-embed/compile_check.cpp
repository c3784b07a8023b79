// Compiles embedded kernels with NVRTC, no GPU needed. Usage: compile_check <path of libnvrtc.so.13>.
// The library is opened first by absolute path, as the package's loader does; Nvrtc::open then finds it loaded.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "kernels.h"

using slimwheel::nvrtc::Error;
using slimwheel::nvrtc::ImageKind;
using slimwheel::nvrtc::Nvrtc;

int main(int argc, char** argv) {
  if (argc != 2 || !::dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
    std::fprintf(stderr, "usage: %s <libnvrtc.so.13> (%s)\n", argv[0], ::dlerror());
    return 2;
  }
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok" : "FAIL", what.c_str());
    failures += !ok;
  };
  const auto& bundle = kernels::bundle();
  Nvrtc nv = Nvrtc::open(bundle, bundle.embedded);
  std::printf("nvrtc %s at %s, %zu archs\n", nv.version().c_str(), nv.where().c_str(), nv.archs().size());
  expect(nv.where().find("already loaded") == 0, "NVRTC found already loaded (RTLD_NOLOAD)");

  for (const char* type : {"float", "double"}) {
    for (int k : {32, 64, 128, 256, 512, 1024, 2048}) {
      const std::string name = std::string("topk::select<") + type + ", " + std::to_string(k) + ">";
      auto t0 = std::chrono::steady_clock::now();
      auto c = nv.compile(bundle, "topk.cuh", name, {}, 90);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("compiled %s for sm_90: %zu bytes in %.3f s, lowered %s\n", name.c_str(), c.image.size(), s,
                  c.lowered_name.c_str());
      expect(c.kind == ImageKind::cubin && c.image.compare(0, 4, "\x7f" "ELF") == 0, name + " is a cubin");
    }
  }
  // A device NVRTC does not know (a future 9.5): PTX for the newest architecture below it.
  auto ptx = nv.compile(bundle, "topk.cuh", "topk::select<float, 32>", {}, 95);
  expect(ptx.kind == ImageKind::ptx && ptx.arch == 90 && ptx.image.find(".target sm_90") != std::string::npos,
         "PTX for compute_90 when the device (9.5) is newer than NVRTC's sm_90 list entry");
  try {
    Nvrtc::target_for(nv.archs(), 50);
    expect(false, "a device older than every NVRTC target is refused");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("cannot target compute capability 5.0") != std::string::npos,
           "a device older than every NVRTC target is refused");
  }
  try {
    nv.compile(bundle, "broken.cuh", "broken<3>", {}, 90);
    expect(false, "a broken source raises");
  } catch (const Error& e) {
    std::printf("error text: %s\n", e.what());
    expect(e.log().find("undeclared_name") != std::string::npos, "the error carries NVRTC's log");
  }
  try {
    nv.compile(bundle, "nope.cuh", "x", {}, 90);
    expect(false, "an unknown source raises");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("no embedded source 'nope.cuh'") != std::string::npos,
           "an unknown source is named in the error");
  }
  std::printf("%d failure(s)\n", failures);
  return failures;
}
