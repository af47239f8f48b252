// move_only_function.hpp — `MoveOnlyFunction<R(Args...)>`, a type-erased callable that may own
// move-only state (C++20's standard library has only the copyable std::function; C++23's
// std::move_only_function is what this stands in for, with the same rules where it has them).
//
//   auto file = std::make_unique<Resource>();
//   sandglass::MoveOnlyFunction<void(int)> fn{[r = std::move(file)](int n) { r->use(n); }};
//   fn(7);
//   auto other = std::move(fn);     // `fn` is empty from here on
//
// - Small-buffer: a callable of at most `kInlineSize` bytes, at most a pointer's alignment,
//   with a noexcept move constructor lives inside the object; any other (an over-aligned one
//   too) is held on the heap (one allocation, at construction). The object is five pointers,
//   without padding: the runtime's job record holds one.
// - Moving a MoveOnlyFunction never throws and never allocates; the source is left empty.
// - Empty: default-constructed, from nullptr, from a null function pointer, a null member
//   pointer, an empty std::function or an empty MoveOnlyFunction, and after it was moved from.
//   Calling an empty one throws std::bad_function_call.
// - `operator()` is not const: the callable may change its own state, as with
//   std::move_only_function<R(Args...)>.
//
// Thread safety: distinct objects: safe. Shared objects: unsafe (calling one from two threads at
// once is safe only if the callable's own call operator is).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace sandglass {

template <typename Signature>
class MoveOnlyFunction;  // defined only for R(Args...)

namespace detail {
template <typename T>
struct IsNullableWrapper : std::false_type {};
template <typename Signature>
struct IsNullableWrapper<std::function<Signature>> : std::true_type {};
template <typename Signature>
struct IsNullableWrapper<MoveOnlyFunction<Signature>> : std::true_type {};

// True for the callables that may be "null" and then make an empty MoveOnlyFunction.
template <typename T>
inline constexpr bool kMayBeNull = std::is_pointer_v<T> || std::is_member_pointer_v<T> ||
                                   IsNullableWrapper<T>::value;
}  // namespace detail

template <typename R, typename... Args>
class MoveOnlyFunction<R(Args...)> {
 public:
  using result_type = R;

  // Bytes a callable may take to be stored inline (without a heap allocation).
  static constexpr std::size_t kInlineSize = 4 * sizeof(void*);

  MoveOnlyFunction() noexcept = default;
  MoveOnlyFunction(std::nullptr_t) noexcept {}  // NOLINT: implicit, like std::function

  // Takes `f` (moved or copied into its own storage). Empty when `f` is a null pointer or an
  // empty function wrapper. Throws what moving/copying `f` throws, or std::bad_alloc.
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, MoveOnlyFunction> &&
             !std::is_same_v<std::remove_cvref_t<F>, std::nullptr_t> &&
             std::is_constructible_v<std::decay_t<F>, F> &&
             std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
  MoveOnlyFunction(F&& f) {  // NOLINT: implicit, like std::function
    using D = std::decay_t<F>;
    if constexpr (detail::kMayBeNull<D>) {
      if (!f) return;
    }
    if constexpr (kStoredInline<D>) {
      ::new (static_cast<void*>(storage_.buffer)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      storage_.heap = new D(std::forward<F>(f));
      ops_ = &kHeapOps<D>;
    }
  }

  MoveOnlyFunction(MoveOnlyFunction&& other) noexcept : ops_{other.ops_} {
    if (ops_ != nullptr) {
      ops_->relocate(other.storage_, storage_);
      other.ops_ = nullptr;
    }
  }

  MoveOnlyFunction& operator=(MoveOnlyFunction&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.ops_ != nullptr) {
        other.ops_->relocate(other.storage_, storage_);
        ops_ = std::exchange(other.ops_, nullptr);
      }
    }
    return *this;
  }

  MoveOnlyFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }

  // Replaces the callable with `f`. If building the new one throws, this one is unchanged.
  template <typename F>
    requires std::is_constructible_v<MoveOnlyFunction, F>
  MoveOnlyFunction& operator=(F&& f) {
    MoveOnlyFunction{std::forward<F>(f)}.swap(*this);
    return *this;
  }

  MoveOnlyFunction(const MoveOnlyFunction&) = delete;
  MoveOnlyFunction& operator=(const MoveOnlyFunction&) = delete;

  ~MoveOnlyFunction() { reset(); }

  void swap(MoveOnlyFunction& other) noexcept {
    if (this == &other) return;
    MoveOnlyFunction tmp{std::move(other)};
    other = std::move(*this);
    *this = std::move(tmp);
  }
  friend void swap(MoveOnlyFunction& a, MoveOnlyFunction& b) noexcept { a.swap(b); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  friend bool operator==(const MoveOnlyFunction& f, std::nullptr_t) noexcept { return !f; }

  // Calls the callable. Throws std::bad_function_call when empty; else what the callable throws.
  R operator()(Args... args) {
    if (ops_ == nullptr) throw std::bad_function_call{};
    return ops_->invoke(storage_, std::forward<Args>(args)...);
  }

 private:
  union Storage {
    alignas(void*) unsigned char buffer[kInlineSize];
    void* heap;
  };

  struct Ops {
    R (*invoke)(Storage& self, Args&&... args);
    // Moves the callable from `from` into the raw `to`, and ends it in `from`.
    void (*relocate)(Storage& from, Storage& to) noexcept;
    void (*destroy)(Storage& self) noexcept;
  };

  template <typename D>
  static constexpr bool kStoredInline = sizeof(D) <= kInlineSize &&
                                        alignof(D) <= alignof(void*) &&
                                        std::is_nothrow_move_constructible_v<D>;

  template <typename D>
  static D& inline_object(Storage& s) noexcept {
    return *std::launder(reinterpret_cast<D*>(s.buffer));
  }

  template <typename D>
  static R call(D& f, Args&&... args) {
    if constexpr (std::is_void_v<R>) {
      std::invoke(f, std::forward<Args>(args)...);
    } else {
      return std::invoke(f, std::forward<Args>(args)...);
    }
  }

  template <typename D>
  static constexpr Ops kInlineOps{
      .invoke = [](Storage& s, Args&&... args) -> R {
        return call(inline_object<D>(s), std::forward<Args>(args)...);
      },
      .relocate =
          [](Storage& from, Storage& to) noexcept {
            D& source = inline_object<D>(from);
            ::new (static_cast<void*>(to.buffer)) D(std::move(source));
            source.~D();
          },
      .destroy = [](Storage& s) noexcept { inline_object<D>(s).~D(); },
  };

  template <typename D>
  static constexpr Ops kHeapOps{
      .invoke = [](Storage& s, Args&&... args) -> R {
        return call(*static_cast<D*>(s.heap), std::forward<Args>(args)...);
      },
      .relocate = [](Storage& from, Storage& to) noexcept { to.heap = from.heap; },
      .destroy = [](Storage& s) noexcept { delete static_cast<D*>(s.heap); },
  };

  void reset() noexcept {
    if (ops_ != nullptr) std::exchange(ops_, nullptr)->destroy(storage_);
  }

  Storage storage_;
  const Ops* ops_ = nullptr;
};

}  // namespace sandglass
