#include "kernels.h"

namespace sf::kernels {
namespace {
const HostTable* g_active = nullptr;
}

const HostTable& active() { return g_active ? *g_active : fast_table(); }

void set_active(const HostTable& table) { g_active = &table; }

}  // namespace sf::kernels
