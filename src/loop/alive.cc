// Alive: see alive.h.
#include "loop/alive.h"

namespace rmsg {
namespace {

const char kServiceKey = 0;

}  // namespace

std::shared_ptr<AliveTable> AliveTable::of(EventLoop& loop) {
  auto found = std::static_pointer_cast<AliveTable>(loop.service(&kServiceKey));
  if (found) return found;
  auto made = std::make_shared<AliveTable>();
  loop.set_service(&kServiceKey, made);
  return made;
}

AliveTable::Slot* AliveTable::add(void* object) {
  if (free_.empty()) {
    chunks_.push_back(std::make_unique<Slot[]>(kChunk));
    Slot* chunk = chunks_.back().get();
    free_.reserve(chunks_.size() * kChunk);  // so that remove() never allocates
    for (std::size_t i = kChunk; i > 0; --i) free_.push_back(&chunk[i - 1]);
  }
  Slot* s = free_.back();
  free_.pop_back();
  s->object = object;
  ++live_;
  return s;
}

void AliveTable::remove(Slot* slot) noexcept {
  slot->object = nullptr;
  ++slot->generation;     // every token of the object now finds nothing
  free_.push_back(slot);  // within the capacity add() reserved
  --live_;
}

}  // namespace rmsg
