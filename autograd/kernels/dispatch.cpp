#include "kernels.h"

namespace sf::kernels {
namespace {
const Table* g_active = nullptr;
}

const Table& active() { return g_active ? *g_active : fast_table(); }

void set_active(const Table& table) { g_active = &table; }

}  // namespace sf::kernels
