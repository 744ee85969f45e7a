// The environment variables the library reads (base/environment.h): the
// table and its documentation hold the same rows, and only the table's are read.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "base/environment.h"
#include "base/error.h"

using namespace sf;

namespace {

// "NAME  when unset: TEXT" for each row of the section "Environment
// variables" of docs/10-formats.md, the cells' backticks dropped.
std::set<std::string> documented_rows() {
  const auto path = std::filesystem::path(__FILE__).parent_path().parent_path() / "docs" / "10-formats.md";
  std::ifstream in(path);
  REQUIRE(in);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  const size_t begin = text.find("\n## Environment variables\n");
  REQUIRE(begin != std::string::npos);
  const std::string section = text.substr(begin, text.find("\n## ", begin + 1) - begin);
  std::set<std::string> rows;
  size_t at = 0;
  while ((at = section.find("\n| `", at)) != std::string::npos) {
    const size_t line_end = section.find('\n', at + 1);
    std::string line = section.substr(at + 3, line_end - at - 3);  // from the name's opening backtick
    std::erase(line, '`');
    const size_t name_end = line.find(" | "), unset_end = line.find(" | ", name_end + 3);
    REQUIRE(unset_end != std::string::npos);
    rows.insert(line.substr(0, name_end) + "  when unset: " + line.substr(name_end + 3, unset_end - name_end - 3));
    at = line_end;
  }
  return rows;
}

std::string joined(const std::set<std::string>& rows) {
  std::string text;
  for (const std::string& row : rows) text += row + "\n";
  return text;
}

}  // namespace

TEST_CASE("environment: the table and docs/10-formats.md list the same variables, with the same behaviour unset") {
  std::set<std::string> table, names;
  for (const environment::Variable& variable : environment::variables()) {
    table.insert(std::string(variable.name) + "  when unset: " + variable.unset);
    names.insert(variable.name);
  }
  CHECK(names.size() == environment::variables().size());  // no name twice
  CHECK(joined(documented_rows()) == joined(table));
}

TEST_CASE("environment: a variable of the table is read as set, any other is an internal error") {
  CHECK(environment::value("HOME") == std::getenv("HOME"));
  CHECK_THROWS_AS(environment::value("SCRATCHFORMER_NO_SUCH_SETTING"), InternalError);
}
