// The command line (apps/ and the library it runs, meshtrain/cli/) reaches the plugins only through
// the generic headers (meshtrain/plugins/builtin_*.h), never through a concrete plugin's own
// (issue 21): it knows plugins by name, as it knows a program's own.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

// An include of a header in a plugin's folder: meshtrain/plugins/<plugin>/...
const std::regex kPluginInclude(R"re(#\s*include\s*["<]meshtrain/plugins/[^/">]+/)re");

TEST(SourceLayout, PatternTellsPluginHeadersFromGenericOnes) {
  EXPECT_TRUE(std::regex_search("#include \"meshtrain/plugins/pp/schedule.h\"", kPluginInclude));
  EXPECT_TRUE(std::regex_search("# include <meshtrain/plugins/fsdp/fsdp_unit.h>", kPluginInclude));
  EXPECT_FALSE(std::regex_search("#include \"meshtrain/plugins/builtin_tools.h\"", kPluginInclude));
}

TEST(SourceLayout, NoFileOfTheCommandLineIncludesAConcretePluginsHeader) {
  for (const char* folder : {"apps", "meshtrain/cli"}) {
    const std::filesystem::path root = std::filesystem::path(MESHTRAIN_SOURCE_DIR) / folder;
    int files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      std::ifstream in(entry.path());
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        ++number;
        EXPECT_FALSE(std::regex_search(line, kPluginInclude))
            << entry.path().string() << ":" << number << ": " << line;
      }
    }
    EXPECT_GT(files, 0) << "nothing read under " << root;
  }
}

}  // namespace
}  // namespace meshtrain
