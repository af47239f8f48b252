// sandglass_forget (functions.sql, sandglass_forget) called directly on a real
// PostgreSQL migrated by `sandglassd --migrate`: it deletes the rows of jobs that finished
// longer ago than the time kept, never a queued or running one nor one that finished since,
// at most `limit` of them, oldest first, and stops at the first row created since; given a
// count (records.max_count), also the done rows beyond the newest that many, but none that
// finished within the least time kept; one call at a time.
#include "cluster/held_session.hpp"
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;

namespace {

// A row of sandglass_jobs with this id and state, created and (when done) finished these many
// seconds before now by the database's clock; `key` an idempotency key or empty.
void add_row(const PostgresServer& pg, int id, const std::string& state, int created_ago,
             int finished_ago = 0, const std::string& key = {}) {
  pg.execute(fmt::format(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, idempotency_key, budget_us, "
      "created_at, deadline, state, owner, attempt, finished_at) VALUES ({0}, 'sleep', '{{}}', 2, "
      "{1}, 60000000, clock_timestamp() - interval '{2} s', clock_timestamp() + interval '60 s', "
      "'{3}', {4}, {5}, {6})",
      id, key.empty() ? "NULL" : "'" + key + "'", created_ago, state,
      state == "queued" ? "NULL" : "'n1/1'", state == "queued" ? 0 : 1,
      state == "done" ? fmt::format("clock_timestamp() - interval '{} s'", finished_ago) : "NULL"));
}

std::string ids(const PostgresServer& pg) {
  return pg.scalar("SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM sandglass_jobs");
}

}  // namespace

TEST_SUITE("cluster forget sql") {
  TEST_CASE("only rows done for longer than the time kept are deleted, their keys freed" *
            doctest::timeout(120)) {
    MigratedDb db;
    add_row(db.pg, 1, "done", 100, 90, "key-a");
    add_row(db.pg, 2, "running", 100);
    add_row(db.pg, 3, "queued", 100);
    add_row(db.pg, 4, "done", 100, 2);  // finished 2 s ago: kept 5 s
    add_row(db.pg, 5, "done", 50, 40);
    add_row(db.pg, 6, "done", 3, 3);
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 100)") == "2");
    CHECK(ids(db.pg) == "2,3,4,6");
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 100)") == "0");
    // Kept one second: the row that finished 2 s ago and the one of 3 s go too.
    CHECK(db.pg.scalar("SELECT sandglass_forget(1000, 100)") == "2");
    CHECK(ids(db.pg) == "2,3");
    // The key of a forgotten job is free for a new job.
    add_row(db.pg, 7, "queued", 0, 0, "key-a");
    CHECK(ids(db.pg) == "2,3,7");
  }

  TEST_CASE("a call deletes at most its limit, the oldest first" * doctest::timeout(120)) {
    MigratedDb db;
    for (int id = 1; id <= 5; ++id) add_row(db.pg, id, "done", 100 - id, 90 - id);
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 2)") == "2");
    CHECK(ids(db.pg) == "3,4,5");
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 2)") == "2");
    CHECK(ids(db.pg) == "5");
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 2)") == "1");
    CHECK(ids(db.pg).empty());
  }

  TEST_CASE("the walk stops at the first row created since the cut-off" * doctest::timeout(120)) {
    MigratedDb db;
    add_row(db.pg, 1, "done", 100, 90);
    add_row(db.pg, 2, "queued", 1);      // created 1 s ago: the walk ends here
    add_row(db.pg, 3, "done", 100, 90);  // an older row behind it waits for a later call
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 100)") == "1");
    CHECK(ids(db.pg) == "2,3");
    db.pg.execute("DELETE FROM sandglass_jobs WHERE id = 2");
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 100)") == "1");
    CHECK(ids(db.pg).empty());
  }

  TEST_CASE("beyond the count the oldest done rows go, live rows are not counted, none that just "
            "finished" * doctest::timeout(120)) {
    MigratedDb db;
    add_row(db.pg, 1, "done", 100, 50);
    add_row(db.pg, 2, "running", 100);
    add_row(db.pg, 3, "done", 90, 30);
    add_row(db.pg, 4, "queued", 80);
    add_row(db.pg, 5, "done", 70, 20);
    add_row(db.pg, 6, "done", 60, 0);  // finished just now: within the least time kept
    add_row(db.pg, 7, "done", 50, 10);
    // Kept 5 min by age: only the count decides. The two newest done rows stay.
    CHECK(db.pg.scalar("SELECT sandglass_forget(300000, 100, 2, 1000)") == "3");
    CHECK(ids(db.pg) == "2,4,6,7");
    CHECK(db.pg.scalar("SELECT sandglass_forget(300000, 100, 2, 1000)") == "0");
    // None kept by count: the one that finished just now still stays.
    CHECK(db.pg.scalar("SELECT sandglass_forget(300000, 100, 0, 1000)") == "1");
    CHECK(ids(db.pg) == "2,4,6");
    // Without a count, as before: by age only.
    CHECK(db.pg.scalar("SELECT sandglass_forget(300000, 100)") == "0");
  }

  TEST_CASE("a call while another is under way returns at once and deletes nothing" *
            doctest::timeout(120)) {
    MigratedDb db;
    for (int id = 1; id <= 3; ++id) add_row(db.pg, id, "done", 100, 90);
    // Another node's call, open: it holds the forget lock to its commit.
    HeldSession other{db.pg.conninfo()};
    other.exec("BEGIN");
    other.exec("SELECT sandglass_forget(5000, 0)");
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 100)") == "0");
    CHECK(ids(db.pg) == "1,2,3");
    other.exec("COMMIT");
    CHECK(db.pg.scalar("SELECT sandglass_forget(5000, 100)") == "3");
    CHECK(ids(db.pg).empty());
  }
}
