// Ring<T>: a FIFO with indexed access, for OutQueue: std::deque's push_back, pop_front and
// operator[] without its block map (an index there is a division into blocks and two loads;
// here a mask and one load). One array whose size is a power of two, doubled when full;
// shrink_if_empty() gives a large one back once nothing is queued, so a burst does not pin
// its memory for the session's life.
//
// Slots that hold no element are value-initialized T (pop_front resets the slot), so T
// must be default-constructible and move-assignable. Threading: none.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace rmsg::session {

template <class T>
class Ring {
 public:
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // i < size().
  T& operator[](std::size_t i) noexcept { return slots_[(head_ + i) & mask_]; }
  const T& operator[](std::size_t i) const noexcept { return slots_[(head_ + i) & mask_]; }
  T& front() noexcept { return slots_[head_]; }
  const T& front() const noexcept { return slots_[head_]; }
  T& back() noexcept { return (*this)[size_ - 1]; }
  const T& back() const noexcept { return (*this)[size_ - 1]; }

  void push_back(T value) { emplace_back() = std::move(value); }
  // Appends a value-initialized element (the slot is one already: see above) and returns
  // it, for the caller to fill in place (no temporary moved in).
  T& emplace_back() {
    if (size_ == slots_.size()) grow();
    return (*this)[size_++];
  }
  // !empty().
  void pop_front() noexcept {
    slots_[head_] = T{};
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  // Gives the array back when nothing is queued and it grew beyond kKeep slots.
  void shrink_if_empty() noexcept {
    if (size_ != 0 || slots_.size() <= kKeep) return;
    std::vector<T>().swap(slots_);
    head_ = 0;
    mask_ = 0;
  }

 private:
  static constexpr std::size_t kFirst = 16;
  static constexpr std::size_t kKeep = 256;

  void grow() {
    std::vector<T> bigger(slots_.empty() ? kFirst : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    slots_.swap(bigger);
    head_ = 0;
    mask_ = slots_.size() - 1;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
};

}  // namespace rmsg::session
