// Writes every embedded file to <out>/<index> and prints "<index> <name> <bytes>".
#include <cstdio>
#include <string>

#include "embedded.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const auto& b = nvt::embedded::bundle();
  for (unsigned i = 0; i < b.count; ++i) {
    const std::string text = b.text(i);
    const std::string path = std::string(argv[1]) + "/" + std::to_string(i);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0) return 1;
    std::printf("%u %s %zu\n", i, b.files[i].name, text.size());
  }
  return 0;
}
