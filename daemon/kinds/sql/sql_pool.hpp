// sql_pool.hpp (private) — `SqlPool`, the bounded connection pool of one database.
//
//   std::optional<SqlPool::Lease> lease = pool.acquire_until(ctx.deadline(), ctx.token());
//   if (!lease) ...;                       // the deadline passed or the job was cancelled
//   if (!lease->connection()) lease->set(open a connection);   // a free slot, not yet connected
//   ... use lease->connection() ...
//   // the lease's destructor keeps a connection that proves clean, and closes any other
//
// At most `size` connections are open or being opened. A lease is either an idle connection
// (the most recently used first, so a lightly loaded pool keeps reusing one backend) or a free
// slot for a new one. An idle connection that is no longer clean (its server went away) is
// closed when it is handed out, and the lease carries a free slot instead.
//
// Thread safety: all member functions may be called concurrently; a Lease belongs to one thread.
#pragma once

#include "daemon/kinds/sql/sql_connection.hpp"

#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace sandglass::daemon {

class SqlPool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_{std::exchange(other.pool_, nullptr)}, connection_{std::move(other.connection_)} {}
    Lease& operator=(Lease&&) = delete;
    ~Lease();

    // Null for a free slot, or after `drop()`.
    SqlConnection* connection() const noexcept { return connection_.get(); }
    void set(std::unique_ptr<SqlConnection> connection) noexcept { connection_ = std::move(connection); }
    // Closes the connection now; the slot stays leased.
    void drop() noexcept { connection_.reset(); }

   private:
    friend class SqlPool;
    Lease(SqlPool& pool, std::unique_ptr<SqlConnection> connection) noexcept
        : pool_{&pool}, connection_{std::move(connection)} {}
    SqlPool* pool_;
    std::unique_ptr<SqlConnection> connection_;
  };

  explicit SqlPool(std::size_t size) : size_{size} {}
  SqlPool(const SqlPool&) = delete;
  SqlPool& operator=(const SqlPool&) = delete;

  // A connection or a free slot. Blocks while all `size` are leased, until one comes back,
  // `until` passes or `token` is cancelled (then nullopt).
  std::optional<Lease> acquire_until(Deadline until, const CancelToken& token);

  // Adds a connection opened outside a lease (at start-up) if there is room; else closes it.
  void add_idle(std::unique_ptr<SqlConnection> connection);

  std::size_t size() const noexcept { return size_; }
  std::size_t open() const;    // idle + leased
  std::size_t in_use() const;  // leased

 private:
  void give_back(std::unique_ptr<SqlConnection> connection) noexcept;

  const std::size_t size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<SqlConnection>> idle_;  // guarded by mu_
  std::size_t leased_ = 0;                            // guarded by mu_
};

}  // namespace sandglass::daemon
