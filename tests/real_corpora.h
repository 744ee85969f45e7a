// Where the tests find the real parallel corpora: ../shared/data beside the
// repository (each folder with a README.md, train.tsv and valid.tsv). Tests
// that read them skip, with a message, when the folder is absent.
#pragma once
#include <filesystem>

namespace sf::testing {

// __FILE__ is tests/real_corpora.h, relative to the
// repository root.
inline std::filesystem::path shared_data() {
  return std::filesystem::absolute(__FILE__).parent_path().parent_path().parent_path() / "shared" / "data";
}

}  // namespace sf::testing
