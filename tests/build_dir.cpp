#include "build_dir.h"

#include <filesystem>

namespace sf::testing {

std::string build_path(const std::string& relative) {
  return (std::filesystem::absolute(SF_BUILD_DIR) / relative).string();
}

}  // namespace sf::testing
