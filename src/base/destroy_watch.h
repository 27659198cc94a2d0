// DestroyWatch: how a dispatch learns that a callback it ran destroyed the object, also
// when the callback ran the loop and a nested dispatch of the same object came and went
// meanwhile. Each dispatch frame pushes a Scope (a flag on its own stack, linked to the
// enclosing frame's); the watch, a member of the object, sets every live frame's flag when
// it is destroyed. A single "destroyed" pointer would be overwritten, then cleared, by the
// nested frame. No allocation and no atomic: a frame costs two pointer moves.
//
// Threading: the object's (its loop's) thread.
#pragma once

namespace rmsg {

class DestroyWatch {
 public:
  class Scope {
   public:
    explicit Scope(DestroyWatch& watch) noexcept : watch_(&watch), outer_(watch.top_) {
      watch.top_ = this;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope(Scope&&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (!destroyed_) watch_->top_ = outer_;  // frames end innermost first
    }
    bool destroyed() const noexcept { return destroyed_; }

   private:
    friend class DestroyWatch;
    DestroyWatch* watch_;
    Scope* outer_;
    bool destroyed_ = false;
  };

  DestroyWatch() = default;
  DestroyWatch(const DestroyWatch&) = delete;
  DestroyWatch& operator=(const DestroyWatch&) = delete;
  DestroyWatch(DestroyWatch&&) = delete;
  DestroyWatch& operator=(DestroyWatch&&) = delete;
  ~DestroyWatch() {
    for (Scope* s = top_; s != nullptr; s = s->outer_) s->destroyed_ = true;
  }

 private:
  Scope* top_ = nullptr;
};

}  // namespace rmsg
