// MoveOnlyFunction: storage, moves, the empty state and calls.
#include <sandglass/move_only_function.hpp>

#include <doctest/doctest.h>

#include <array>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

using sandglass::MoveOnlyFunction;

namespace {

// Counts live instances, so a test can tell a leak or a double destruction.
struct Tracked {
  static inline int alive = 0;
  Tracked() noexcept { ++alive; }
  Tracked(const Tracked&) noexcept { ++alive; }
  Tracked(Tracked&&) noexcept { ++alive; }
  ~Tracked() { --alive; }
};

// Too big for the inline buffer.
struct Big {
  std::array<char, 256> bytes{};
  Tracked tracked;
  int operator()(int n) const { return n + bytes[0]; }
};

// Small, but its move constructor may throw: must not be stored inline (moves are noexcept).
struct ThrowingMove {
  ThrowingMove() = default;
  ThrowingMove(const ThrowingMove&) = default;
  ThrowingMove(ThrowingMove&&) noexcept(false) {}
  int operator()(int n) const { return n * 3; }
};

struct Adder {
  int base;
  int add(int n) const { return base + n; }
};

int twice(int n) { return 2 * n; }

}  // namespace

static_assert(!std::is_copy_constructible_v<MoveOnlyFunction<void()>>);
static_assert(!std::is_copy_assignable_v<MoveOnlyFunction<void()>>);
static_assert(std::is_nothrow_move_constructible_v<MoveOnlyFunction<void()>>);
static_assert(std::is_nothrow_move_assignable_v<MoveOnlyFunction<void()>>);
// A callable of the wrong signature does not convert.
static_assert(!std::is_constructible_v<MoveOnlyFunction<int(int)>, std::string>);
static_assert(!std::is_constructible_v<MoveOnlyFunction<int(int)>, int (*)(std::string)>);
static_assert(std::is_constructible_v<MoveOnlyFunction<void(int)>, int (*)(int)>);  // result dropped

TEST_SUITE("MoveOnlyFunction") {
  TEST_CASE("a callable that owns a unique_ptr is stored, called and moved") {
    auto owned = std::make_unique<int>(41);
    MoveOnlyFunction<int(int)> fn{[p = std::move(owned)](int n) { return *p + n; }};
    REQUIRE(fn);
    CHECK(fn(1) == 42);
    MoveOnlyFunction<int(int)> moved{std::move(fn)};
    CHECK_FALSE(fn);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    CHECK(moved(2) == 43);
  }

  TEST_CASE("a default-constructed or null-initialised function is empty and throws when called") {
    MoveOnlyFunction<void()> a;
    MoveOnlyFunction<void()> b{nullptr};
    MoveOnlyFunction<int(int)> c{static_cast<int (*)(int)>(nullptr)};
    MoveOnlyFunction<int(int)> d{std::function<int(int)>{}};
    MoveOnlyFunction<int(const Adder&, int)> e{static_cast<int (Adder::*)(int) const>(nullptr)};
    CHECK_FALSE(a);
    CHECK_FALSE(b);
    CHECK_FALSE(c);
    CHECK_FALSE(d);
    CHECK_FALSE(e);
    CHECK(a == nullptr);
    CHECK_THROWS_AS(a(), std::bad_function_call);
    CHECK_THROWS_AS(c(1), std::bad_function_call);
    CHECK_THROWS_AS(d(1), std::bad_function_call);
  }

  TEST_CASE("function pointers, member pointers and std::function are called like std::invoke") {
    MoveOnlyFunction<int(int)> fp{&twice};
    CHECK(fp(21) == 42);
    MoveOnlyFunction<int(const Adder&, int)> member{&Adder::add};
    CHECK(member(Adder{40}, 2) == 42);
    MoveOnlyFunction<int(const Adder&)> field{&Adder::base};
    CHECK(field(Adder{7}) == 7);
    MoveOnlyFunction<int(int)> wrapped{std::function<int(int)>{[](int n) { return n - 1; }}};
    CHECK(wrapped(43) == 42);
  }

  TEST_CASE("a stateful callable keeps its state between calls") {
    MoveOnlyFunction<int()> counter{[n = 0]() mutable { return ++n; }};
    CHECK(counter() == 1);
    CHECK(counter() == 2);
    auto moved = std::move(counter);
    CHECK(moved() == 3);
  }

  TEST_CASE("arguments are forwarded: references stay references, rvalues are moved") {
    MoveOnlyFunction<void(std::string&)> append{[](std::string& s) { s += "!"; }};
    std::string text = "hi";
    append(text);
    CHECK(text == "hi!");

    MoveOnlyFunction<std::size_t(std::unique_ptr<std::string>)> take{
        [](std::unique_ptr<std::string> p) { return p->size(); }};
    CHECK(take(std::make_unique<std::string>("four")) == 4);
  }

  TEST_CASE("small, large and throwing-move callables are destroyed exactly once") {
    REQUIRE(Tracked::alive == 0);
    SUBCASE("inline") {
      {
        MoveOnlyFunction<int(int)> fn{[t = Tracked{}](int n) { return n; }};
        CHECK(Tracked::alive == 1);
        auto moved = std::move(fn);
        CHECK(Tracked::alive == 1);
        CHECK(moved(5) == 5);
      }
      CHECK(Tracked::alive == 0);
    }
    SUBCASE("on the heap") {
      {
        MoveOnlyFunction<int(int)> fn{Big{}};
        CHECK(Tracked::alive == 1);
        auto moved = std::move(fn);
        CHECK(Tracked::alive == 1);  // the heap object changed owner, not copied
        CHECK(moved(5) == 5);
        moved = nullptr;
        CHECK(Tracked::alive == 0);
        CHECK_FALSE(moved);
      }
      CHECK(Tracked::alive == 0);
    }
    SUBCASE("a throwing move goes to the heap and still moves without throwing") {
      MoveOnlyFunction<int(int)> fn{ThrowingMove{}};
      auto moved = std::move(fn);
      CHECK(moved(2) == 6);
    }
  }

  TEST_CASE("assignment replaces and destroys the old callable, self-move keeps it") {
    REQUIRE(Tracked::alive == 0);
    {
      MoveOnlyFunction<int()> fn{[t = Tracked{}] { return 1; }};
      MoveOnlyFunction<int()> other{[t = Tracked{}, u = Tracked{}] { return 2; }};
      CHECK(Tracked::alive == 3);
      fn = std::move(other);
      CHECK(Tracked::alive == 2);
      CHECK(fn() == 2);
      CHECK_FALSE(other);  // NOLINT(bugprone-use-after-move)
      auto& alias = fn;
      fn = std::move(alias);
      CHECK(fn() == 2);
      fn = [] { return 3; };
      CHECK(Tracked::alive == 0);
      CHECK(fn() == 3);
    }
    CHECK(Tracked::alive == 0);
  }

  TEST_CASE("swap exchanges callables of both storage kinds") {
    MoveOnlyFunction<int(int)> small{[](int n) { return n + 1; }};
    MoveOnlyFunction<int(int)> big{Big{}};
    swap(small, big);
    CHECK(small(1) == 1);
    CHECK(big(1) == 2);
    MoveOnlyFunction<int(int)> empty;
    empty.swap(big);
    CHECK_FALSE(big);
    CHECK(empty(1) == 2);
  }

  TEST_CASE("an exception from the callable reaches the caller and the function stays usable") {
    int calls = 0;
    MoveOnlyFunction<void(bool)> fn{[&calls](bool fail) {
      ++calls;
      if (fail) throw std::runtime_error{"boom"};
    }};
    CHECK_THROWS_WITH_AS(fn(true), "boom", std::runtime_error);
    fn(false);
    CHECK(calls == 2);
  }

  TEST_CASE("a callable whose construction throws leaves an assigned-to function unchanged") {
    struct ThrowsOnCopy {
      ThrowsOnCopy() = default;
      ThrowsOnCopy(const ThrowsOnCopy&) { throw std::runtime_error{"copy"}; }
      int operator()() const { return 9; }
    };
    MoveOnlyFunction<int()> fn{[] { return 1; }};
    const ThrowsOnCopy source;
    CHECK_THROWS_AS(fn = source, std::runtime_error);
    REQUIRE(fn);
    CHECK(fn() == 1);
  }

  TEST_CASE("an over-aligned callable is held on the heap and still called, moved and destroyed") {
    struct alignas(32) Wide {
      int* calls;
      int operator()(int n) { return *calls += n; }
    };
    int calls = 0;
    sandglass::MoveOnlyFunction<int(int)> fn{Wide{&calls}};
    CHECK(fn(2) == 2);
    auto moved = std::move(fn);
    CHECK_FALSE(fn);
    CHECK(moved(3) == 5);
    // Five pointers and no padding: the inline buffer is pointer-aligned.
    CHECK(sizeof(moved) == 5 * sizeof(void*));
  }
}
