// Alive<T>: the one way rmsg code learns, after a callback, whether an object of a loop is
// still there. The object holds an Alive<T> (a member, constructed with its loop and
// `this`); whoever must ask later takes a Token, a 16-byte trivially copyable value:
//
//   - a task, timer or stream callback deferred for the object captures the token and
//     starts with `if (T* self = token.get())` (or, holding `this` too, with `if
//     (!token.alive()) return;`; a lambda of the token alone fits inside its std::function,
//     so hot paths capture only the token);
//   - a dispatch frame that calls out (a readiness callback, an accept callback) takes a
//     token before the call and asks `token.alive()` after it. Each frame holds its own
//     token, so a callback that runs the loop, inside which the same object is dispatched
//     again (or destroyed and another made in its place), leaves the outer frame's answer
//     right.
//
// A token is a slot of a per-loop table and the generation it had when the token was
// taken: asking is one load and a compare, taking one is two loads. No allocation per
// token (a lambda holding one is stored inside the std::function), no reference count,
// no atomic. end() (or the destructor) bumps the slot's generation and frees the slot for
// reuse; generations are 64-bit, so a token never matches a later object.
//
// This answers "is it still alive", not "keep it alive": the object's owner decides its
// lifetime. It does not cross threads: a task posted from another thread holds a
// std::weak_ptr to a shared owner instead (docs/HACKING.md, "Lifetime across callbacks").
//
// Ownership: the table is a loop service (EventLoop::set_service), also held by every
// Alive that took a slot, so an object destroyed after its loop still frees its slot. A
// token does not hold the table: ask it only from the loop (its tasks, timers, callbacks),
// not after the loop is gone; a task the loop drops unrun never asks.
// Threading: the loop thread. The object may be made on any thread (the slot is taken by
// the first token()); once a token was taken, end() and the destructor run on the loop
// thread too (as a loop's objects are used only there).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "rmsg/event_loop.h"

namespace rmsg {

class AliveTable {
 public:
  struct Slot {
    void* object = nullptr;
    std::uint64_t generation = 1;  // of the object there now, or of the next one
  };

  static std::shared_ptr<AliveTable> of(EventLoop& loop);

  AliveTable() = default;
  AliveTable(const AliveTable&) = delete;
  AliveTable& operator=(const AliveTable&) = delete;

  Slot* add(void* object);
  void remove(Slot* slot) noexcept;
  std::size_t live() const noexcept { return live_; }  // objects holding a slot (tests)

 private:
  static constexpr std::size_t kChunk = 64;
  std::vector<std::unique_ptr<Slot[]>> chunks_;  // slots never move: tokens point at them
  std::vector<Slot*> free_;
  std::size_t live_ = 0;
};

template <class T>
class Alive {
 public:
  class Token {
   public:
    Token() = default;  // never alive
    bool alive() const noexcept { return slot_ != nullptr && slot_->generation == generation_; }
    explicit operator bool() const noexcept { return alive(); }
    T* get() const noexcept { return alive() ? static_cast<T*>(slot_->object) : nullptr; }

   private:
    friend class Alive;
    Token(const AliveTable::Slot* slot, std::uint64_t generation) noexcept
        : slot_(slot), generation_(generation) {}
    const AliveTable::Slot* slot_ = nullptr;
    std::uint64_t generation_ = 0;
  };

  // Takes no slot yet: the first token() does, on the loop thread, so the object may be
  // made on another thread (before its loop runs, or for a loop it is then handed to).
  Alive(EventLoop& loop, T* object) noexcept : loop_(&loop), object_(object) {}
  Alive(const Alive&) = delete;
  Alive& operator=(const Alive&) = delete;
  Alive(Alive&&) = delete;
  Alive& operator=(Alive&&) = delete;
  ~Alive() { end(); }

  // A token that stays alive until end(); after end() it is born dead. Inlined: a dispatch
  // takes one per callback (the first, which takes the slot, is out of line).
  [[gnu::always_inline]] Token token() {
    if (slot_ == nullptr) [[unlikely]] {
      take_slot();
      if (slot_ == nullptr) return Token();  // ended
    }
    return Token(slot_, slot_->generation);
  }
  // Every token taken so far, and any taken later, finds nothing: for an object that tears
  // down before it is destroyed (its deferred tasks become no-ops then). Idempotent.
  void end() noexcept {
    ended_ = true;
    if (slot_ != nullptr) table_->remove(std::exchange(slot_, nullptr));
  }
  bool ended() const noexcept { return ended_; }

 private:
  [[gnu::noinline, gnu::cold]] void take_slot() {
    if (ended_) return;
    table_ = AliveTable::of(*loop_);
    slot_ = table_->add(static_cast<void*>(object_));
  }

  EventLoop* loop_;
  T* object_;
  AliveTable::Slot* slot_ = nullptr;  // taken by the first token()
  std::shared_ptr<AliveTable> table_;
  bool ended_ = false;
};

}  // namespace rmsg
