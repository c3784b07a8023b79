// Tests of slimwheel/nvrtc.hpp's disk cache, without CUDA: built with g++ and run by
// tests/integration/test_nvrtc_embed.py. Usage: nvrtc_cache_test <empty scratch folder>. Prints one line per check
// ("ok <name>" or "FAIL <name>: <detail>") and exits with the number of failures.
#include <slimwheel/nvrtc.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using slimwheel::nvrtc::Cache;
using slimwheel::nvrtc::Sha256;

namespace {

int failures = 0;

void expect(bool ok, const std::string& name, const std::string& detail = "") {
  if (ok) {
    std::printf("ok %s\n", name.c_str());
  } else {
    std::printf("FAIL %s: %s\n", name.c_str(), detail.c_str());
    ++failures;
  }
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string& path, const std::string& data, mode_t mode = 0600) {
  ::unlink(path.c_str());
  std::ofstream(path, std::ios::binary) << data;
  ::chmod(path.c_str(), mode);
}

Cache::Settings at(const std::string& dir, std::uint64_t max_bytes = 1 << 20) {
  Cache::Settings s;
  s.dir = dir;
  s.max_bytes = max_bytes;
  return s;
}

std::string key_of(const std::string& text) { return Sha256::of(text); }

// A payload with every byte value, NULs included: images are binary.
std::string binary_payload(std::size_t n, unsigned seed) {
  std::string p(n, '\0');
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>((i * 131u + seed * 7u) & 0xffu);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <scratch folder>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string dir = root + "/cache";
  const std::string payload = binary_payload(5000, 1);
  const std::string k1 = key_of("one"), k2 = key_of("two");

  {
    // The driver is never searched for by its bare name: only absolute folders, in the loader's order.
    ::mkdir((root + "/conf.d").c_str(), 0700);
    spit(root + "/ld.so.conf", "include conf.d/*.conf\n/opt/a  # a comment\n\n  /opt/c/\nnot/absolute\n");
    spit(root + "/conf.d/x.conf", "/opt/b\ninclude ../ld.so.conf\n");  // a loop: bounded by depth
    std::vector<std::string> conf;
    slimwheel::nvrtc::detail::ld_so_conf(root + "/ld.so.conf", conf);
    expect(conf.size() >= 3 && conf[0] == "/opt/b" && conf.back() == "/opt/c/", "ld.so.conf: includes first, in order",
           conf.empty() ? "" : conf[0]);
    expect(conf.size() < 64, "ld.so.conf: an include loop is bounded", std::to_string(conf.size()));
    auto c = slimwheel::nvrtc::detail::driver_candidates("/x::rel:/y/:.", {"/opt/a", "/x"});
    expect(c.size() >= 3 && c[0] == "/x/libcuda.so.1" && c[1] == "/y/libcuda.so.1" && c[2] == "/opt/a/libcuda.so.1",
           "driver candidates: LD_LIBRARY_PATH's absolute folders, then ld.so.conf's", c.empty() ? "" : c[0]);
    bool all_absolute = true, unique = true;
    for (std::size_t n = 0; n < c.size(); ++n) {
      all_absolute = all_absolute && c[n][0] == '/';
      for (std::size_t m = 0; m < n; ++m) unique = unique && c[m] != c[n];
    }
    expect(all_absolute, "driver candidates: no empty, relative or '.' folder (the current directory)");
    expect(unique, "driver candidates: each folder once");
    expect(std::find(c.begin(), c.end(), "/usr/lib/x86_64-linux-gnu/libcuda.so.1") != c.end(),
           "driver candidates: glibc's default folders");
  }
  {
    Cache c(at(dir));
    expect(c.enabled(), "creates the folder", c.disabled_reason());
    struct stat st {};
    ::stat(dir.c_str(), &st);
    expect((st.st_mode & 0777) == 0700, "folder is private (0700)", std::to_string(st.st_mode & 0777));
    expect(!c.load(k1).has_value(), "miss before store");
    expect(c.store(k1, payload), "store");
    auto got = c.load(k1);
    expect(got && *got == payload, "round trip, byte for byte");
    ::stat(c.path_of(k1).c_str(), &st);
    expect((st.st_mode & 0777) == 0600, "file is private (0600)", std::to_string(st.st_mode & 0777));
  }
  {
    Cache c(at(dir));
    const std::string path = c.path_of(k1);
    std::string good = slurp(path);

    std::string flipped = good;
    flipped[flipped.size() - 10] ^= 0x01;
    spit(path, flipped);
    expect(!c.load(k1).has_value(), "a corrupted payload is not loaded");
    expect(::access(path.c_str(), F_OK) != 0, "a corrupted file is removed");

    spit(path, good.substr(0, good.size() - 1));
    expect(!c.load(k1).has_value(), "a truncated file is not loaded");

    spit(path, good + "x");
    expect(!c.load(k1).has_value(), "a file with trailing bytes is not loaded");

    // A well-formed entry for another key, planted under k2's name (hash and size are right for its payload).
    spit(c.path_of(k2), good);
    expect(!c.load(k2).has_value(), "a planted file for another key is not loaded");

    // A planted file whose header claims the right key and size but whose hash is for other bytes.
    std::string evil = binary_payload(5000, 2);
    std::string forged = Cache::header(k1, payload) + evil;
    spit(path, forged);
    expect(!c.load(k1).has_value(), "a planted payload with a forged header is not loaded");

    spit(path, "SLWNVK1\n");
    expect(!c.load(k1).has_value(), "a header-only file is not loaded");

    spit(path, good, 0666);
    expect(!c.load(k1).has_value(), "a file writable by others is not loaded");
    spit(path, good, 0620);
    expect(!c.load(k1).has_value(), "a file writable by the group is not loaded");

    const std::string target = root + "/elsewhere.slwk";
    spit(target, good);
    ::unlink(path.c_str());
    expect(::symlink(target.c_str(), path.c_str()) == 0, "symlink planted");
    expect(!c.load(k1).has_value(), "a symbolic link is not followed");
    ::unlink(path.c_str());

    if (::geteuid() == 0) {
      spit(path, good);
      expect(::chown(path.c_str(), 65534, 65534) == 0, "chown to nobody");
      expect(!c.load(k1).has_value(), "a file owned by another user is not loaded");
    }
    // As any user: a cache that belongs to another uid sees every file as foreign.
    spit(path, good);
    Cache other(at(dir), ::geteuid() + 1);
    expect(!other.enabled(), "a folder owned by another user is refused", other.disabled_reason());
    expect(c.load(k1).has_value(), "the genuine file still loads");

    expect(!c.load("../../etc/passwd").has_value(), "a key that is not 64 hex digits is refused");
    expect(!c.store("ABC", payload), "store refuses a malformed key");
  }
  {
    const std::string open_dir = root + "/open";
    ::mkdir(open_dir.c_str(), 0700);
    ::chmod(open_dir.c_str(), 0777);
    Cache c(at(open_dir));
    expect(!c.enabled(), "a folder writable by everyone is refused", c.dir());
    ::chmod(open_dir.c_str(), 0770);
    Cache g(at(open_dir));
    expect(!g.enabled(), "a folder writable by the group is refused", g.dir());

    const std::string parent = root + "/public";
    ::mkdir(parent.c_str(), 0700);
    ::chmod(parent.c_str(), 0777);
    Cache p(at(parent + "/cache"));
    expect(!p.enabled(), "a folder under a world-writable parent is refused", p.dir());
    ::chmod(parent.c_str(), 01777);
    Cache sticky(at(parent + "/cache2"));
    expect(sticky.enabled(), "a world-writable parent with the sticky bit (like /tmp) is fine",
           sticky.disabled_reason());

    const std::string link = root + "/link";
    expect(::symlink(dir.c_str(), link.c_str()) == 0, "symlink to the cache planted");
    Cache l(at(link));
    expect(!l.enabled(), "a cache folder that is a symbolic link is refused");
  }
  {
    // Issue 24 item 7: the path is judged as given and as resolved, every component, at each use.
    const std::string ww = root + "/ww", real = root + "/real";
    ::mkdir(ww.c_str(), 0700);
    ::chmod(ww.c_str(), 0777);  // world-writable, no sticky bit: anyone may replace the link below
    ::mkdir(real.c_str(), 0755);
    expect(::symlink(real.c_str(), (ww + "/c").c_str()) == 0, "a link in a world-writable folder planted");
    Cache via(at(ww + "/c/cache"));
    expect(!via.enabled(), "a cache reached through a link in a world-writable folder is refused", via.dir());
    const std::string plain = root + "/plain";
    ::mkdir(plain.c_str(), 0755);
    expect(::symlink(real.c_str(), (plain + "/c").c_str()) == 0, "a link in an ordinary folder planted");
    Cache ok(at(plain + "/c/cache"));
    expect(ok.enabled(), "a cache reached through a link in an ordinary folder is fine", ok.disabled_reason());
    expect(ok.store(k1, payload) && ok.load(k1).has_value(), "and it stores and loads");

    // The folder swapped, after the cache was opened, for a link to a folder everyone can write.
    const std::string swapped = root + "/swapped", open = root + "/open777";
    Cache sw(at(swapped));
    expect(sw.enabled() && sw.store(k1, payload), "the cache works before the swap", sw.disabled_reason());
    expect(::rename(swapped.c_str(), (root + "/swapped.old").c_str()) == 0, "the cache folder moved away");
    ::mkdir(open.c_str(), 0700);
    ::chmod(open.c_str(), 0777);
    expect(::symlink(open.c_str(), swapped.c_str()) == 0, "a link to a 0777 folder put in its place");
    expect(!sw.store(k2, payload), "the next store is refused");
    expect(::access((open + "/" + k2 + ".slwk").c_str(), F_OK) != 0, "nothing was written into the 0777 folder");
    spit(open + "/" + k1 + ".slwk", slurp(root + "/swapped.old/" + k1 + ".slwk"));
    expect(!sw.load(k1).has_value(), "nothing is loaded through the link either");
    bool left = false;
    if (DIR* d = ::opendir(open.c_str())) {
      while (dirent* e = ::readdir(d)) left = left || std::strncmp(e->d_name, ".tmp-", 5) == 0;
      ::closedir(d);
    }
    expect(!left, "no temporary file in the 0777 folder");

    // A parent made world-writable after the cache was opened: refused at the next use.
    const std::string parent = root + "/later", inside = parent + "/cache";
    ::mkdir(parent.c_str(), 0755);
    Cache lt(at(inside));
    expect(lt.enabled() && lt.store(k1, payload), "the cache works before its parent opens up", lt.disabled_reason());
    ::chmod(parent.c_str(), 0777);
    expect(!lt.store(k2, payload) && !lt.load(k1).has_value(), "a parent made world-writable stops loads and stores");
    ::chmod(parent.c_str(), 0755);
    expect(lt.load(k1).has_value(), "and they work again when it is closed");
  }
  {
    // Writers' temporary files: counted against the cap; a killed writer's (old) are removed, a live one's kept.
    const std::string tdir = root + "/temps";
    const std::string p = binary_payload(1000, 4);
    const std::uint64_t one = 1000 + Cache::kHeader;
    Cache c(at(tdir, 3 * one));
    expect(c.store(key_of("t0"), p) && c.store(key_of("t1"), p), "two files stored");
    const std::string dead = tdir + "/.tmp-killedwriter1", live = tdir + "/.tmp-livewriter01";
    spit(dead, std::string(50000, 'x'));
    struct timespec old[2] = {{1000, 0}, {1000, 0}};
    ::utimensat(AT_FDCWD, dead.c_str(), old, 0);
    spit(live, std::string(one, 'y'));
    struct timespec t0[2] = {{2000, 0}, {2000, 0}};
    ::utimensat(AT_FDCWD, c.path_of(key_of("t0")).c_str(), t0, 0);
    expect(c.store(key_of("t2"), p), "a third file stored");
    expect(::access(dead.c_str(), F_OK) != 0, "a killed writer's temporary file is removed");
    expect(::access(live.c_str(), F_OK) == 0, "a live writer's temporary file is kept");
    expect(::access(c.path_of(key_of("t0")).c_str(), F_OK) != 0 && ::access(c.path_of(key_of("t2")).c_str(), F_OK) == 0,
           "a live temporary file counts against the cap: the oldest cache file made room");
  }
  {
    // Size cap: the least recently used files go first.
    const std::string small = root + "/small";
    const std::string p = binary_payload(1000, 3);
    Cache c(at(small, 3 * (1000 + Cache::kHeader)));
    std::string keys[4];
    for (int i = 0; i < 4; ++i) {
      keys[i] = key_of("k" + std::to_string(i));
      struct timespec t[2] = {{1000 + i, 0}, {1000 + i, 0}};
      c.store(keys[i], p);
      ::utimensat(AT_FDCWD, c.path_of(keys[i]).c_str(), t, 0);
    }
    int present = 0;
    for (const auto& k : keys) present += ::access(c.path_of(k).c_str(), F_OK) == 0;
    expect(present == 3, "eviction keeps the cache under its cap", std::to_string(present) + " files");
    // Oldest is evicted at the next store after the utimensat above gave the files distinct ages.
    c.store(key_of("k4"), p);
    expect(::access(c.path_of(keys[1]).c_str(), F_OK) != 0 && ::access(c.path_of(keys[3]).c_str(), F_OK) == 0,
           "eviction removes the least recently used file");
    Cache tiny(at(small, 100));
    expect(!tiny.store(key_of("big"), p), "a payload over the cap is not stored");
    expect(!tiny.load(keys[3]).has_value(), "a file over the cap is not read");
  }
  {
    ::setenv("SLIMWHEEL_NVRTC_CACHE", "off", 1);
    expect(Cache::settings_from_env().dir.empty(), "SLIMWHEEL_NVRTC_CACHE=off disables");
    ::setenv("SLIMWHEEL_NVRTC_CACHE", "0", 1);
    expect(Cache::settings_from_env().dir.empty(), "SLIMWHEEL_NVRTC_CACHE=0 disables");
    ::setenv("SLIMWHEEL_NVRTC_CACHE", "relative/dir", 1);
    expect(Cache::settings_from_env().dir.empty(), "a relative SLIMWHEEL_NVRTC_CACHE is refused");
    ::setenv("SLIMWHEEL_NVRTC_CACHE", (root + "/moved").c_str(), 1);
    expect(Cache::settings_from_env().dir == root + "/moved", "SLIMWHEEL_NVRTC_CACHE=<path> moves it");
    ::unsetenv("SLIMWHEEL_NVRTC_CACHE");
    ::setenv("XDG_CACHE_HOME", (root + "/xdg").c_str(), 1);
    expect(Cache::settings_from_env().dir == root + "/xdg/slimwheel-nvrtc", "XDG_CACHE_HOME is honoured");
    ::setenv("XDG_CACHE_HOME", "xdg-relative", 1);
    ::setenv("HOME", (root + "/home").c_str(), 1);
    expect(Cache::settings_from_env().dir == root + "/home/.cache/slimwheel-nvrtc",
           "a relative XDG_CACHE_HOME is ignored (XDG spec): ~/.cache");
    ::setenv("SLIMWHEEL_NVRTC_CACHE_MAX_MB", "7", 1);
    expect(Cache::settings_from_env().max_bytes == 7ull << 20, "SLIMWHEEL_NVRTC_CACHE_MAX_MB sets the cap");
    const std::uint64_t default_cap = Cache::Settings{}.max_bytes;
    for (const char* bad : {"7MB", "-7", " 7", "", "99999999999999999999", "17592186044416"}) {
      ::setenv("SLIMWHEEL_NVRTC_CACHE_MAX_MB", bad, 1);
      expect(Cache::settings_from_env().max_bytes == default_cap,
             (std::string("SLIMWHEEL_NVRTC_CACHE_MAX_MB='") + bad + "' (not a whole number of MiB that fits) is ignored")
                 .c_str());
    }
    ::unsetenv("SLIMWHEEL_NVRTC_CACHE_MAX_MB");
  }
  {
    using slimwheel::nvrtc::unpack;
    const std::string body = std::string("name") + '\0' + "image";
    auto c = unpack("C90\n" + body);
    expect(c && c->kind == slimwheel::nvrtc::ImageKind::cubin && c->arch == 90 && c->lowered_name == "name" &&
               c->image == "image",
           "a cached payload unpacks to kind, architecture, name and image");
    auto ptx = unpack("P120\n" + body);
    expect(ptx && ptx->kind == slimwheel::nvrtc::ImageKind::ptx && ptx->arch == 120, "a PTX payload unpacks");
    for (const char* head : {"X90\n", "C\n", "C9x\n", "C-90\n", "C0\n", "C 90\n", "C99999999999\n"})
      expect(!unpack(head + body).has_value(),
             ("payload head '" + std::string(head, std::strlen(head) - 1) + "\\n' is refused").c_str());
  }
  std::printf("%d failure(s)\n", failures);
  return failures;
}
