// The cluster schema that `sandglassd --migrate` gives is exactly what its files describe
// (daemon/cluster/migrations/: the numbered schema files and functions.sql): the same tables,
// columns, indexes, triggers and functions (signatures and bodies) as the files applied by hand
// to an empty schema; a second --migrate changes nothing; a database whose schema was made by
// other migration files is refused with a message that says what to do.
#include "daemon_test_support.hpp"
#include "postgres_server.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace sandglass::testing;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The numbered schema files in version order, then functions.sql: what `migrate` applies.
std::vector<std::string> schema_files() {
  const std::filesystem::path dir = source_path("daemon/cluster/migrations");
  std::vector<std::string> numbered;
  for (const auto& entry : std::filesystem::directory_iterator{dir}) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[0])) && name.ends_with(".sql")) {
      numbered.push_back(entry.path().string());
    }
  }
  std::sort(numbered.begin(), numbered.end());
  numbered.push_back((dir / "functions.sql").string());
  return numbered;
}

// One line per object of `schema` (tables and their columns, indexes, triggers, functions with
// their arguments, result, settings and body), sorted; the migrations' own bookkeeping table
// left out. Two schemas with equal descriptions have the same objects.
std::string describe(const PostgresServer& pg, const std::string& schema) {
  const std::string sql = fmt::format(
      "SELECT string_agg(d, E'\\n' ORDER BY d) FROM ("
      " SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)"
      "        || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END"
      "        || coalesce(' default ' || replace(pg_get_expr(ad.adbin, ad.adrelid), '{0}.', ''), '')"
      "        || ' #' || a.attnum AS d"
      "   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
      "   JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
      "   LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum"
      "  WHERE n.nspname = '{0}' AND c.relkind = 'r' AND c.relname <> 'sandglass_schema_migrations'"
      " UNION ALL"
      " SELECT 'table ' || c.relname || ' ' || coalesce(array_to_string(c.reloptions, ','), '')"
      "   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
      "  WHERE n.nspname = '{0}' AND c.relkind = 'r' AND c.relname <> 'sandglass_schema_migrations'"
      " UNION ALL"
      " SELECT 'index ' || replace(pg_get_indexdef(i.indexrelid), '{0}.', '')"
      "   FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
      "  WHERE n.nspname = '{0}' AND c.relname <> 'sandglass_schema_migrations'"
      " UNION ALL"
      " SELECT 'constraint ' || c.relname || ' ' || replace(pg_get_constraintdef(k.oid), '{0}.', '')"
      "   FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
      "  WHERE n.nspname = '{0}' AND c.relname <> 'sandglass_schema_migrations'"
      " UNION ALL"
      " SELECT 'trigger ' || replace(pg_get_triggerdef(t.oid), '{0}.', '')"
      "   FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
      "  WHERE n.nspname = '{0}' AND NOT t.tgisinternal"
      " UNION ALL"
      " SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') '"
      "        || pg_get_function_result(p.oid) || ' ' || coalesce(array_to_string(p.proconfig, ','), '')"
      "        || ' ' || md5(p.prosrc)"
      "   FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = '{0}'"
      ") x",
      schema);
  return pg.scalar(sql);
}

// The lines of `a` that `b` lacks, for a failure's message.
std::string lines_missing(const std::string& a, const std::string& b) {
  std::vector<std::string> in_b;
  std::istringstream sb{b};
  for (std::string line; std::getline(sb, line);) in_b.push_back(line);
  std::string missing;
  std::istringstream sa{a};
  for (std::string line; std::getline(sa, line);) {
    if (std::find(in_b.begin(), in_b.end(), line) == in_b.end()) missing += line + "\n";
  }
  return missing;
}

void migrate(const PostgresServer& pg, const std::string& expect_in_output) {
  const std::string path = write_temp_file("cluster.toml", "[cluster]\nconninfo = \"" + pg.conninfo() + "\"\n");
  const RunResult r = run_sandglassd({"--config", path, "--migrate"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(expect_in_output) != std::string::npos);
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a fresh --migrate gives exactly the schema its files describe, and a second changes nothing" *
          doctest::timeout(120)) {
  PostgresServer pg;
  migrate(pg, "schema migrated from version 0 to");
  const std::string migrated = describe(pg, "public");
  CHECK(migrated.find("function sandglass_claim(") != std::string::npos);
  CHECK(migrated.find("index CREATE INDEX sandglass_jobs_queue ") != std::string::npos);

  // The same files applied by hand, in the order `migrate` applies them, to an empty schema.
  std::string by_hand = "CREATE SCHEMA expected; SET search_path = expected;\n";
  for (const std::string& file : schema_files()) by_hand += read_file(file) + "\n";
  pg.execute(by_hand);
  const std::string expected = describe(pg, "expected");
  CHECK(lines_missing(migrated, expected) == "");
  CHECK(lines_missing(expected, migrated) == "");

  // Every function in the database is one of the file's, once: as many as the file defines.
  const std::string functions = read_file(source_path("daemon/cluster/migrations/functions.sql"));
  std::size_t defined = 0;
  for (std::size_t at = functions.find("CREATE OR REPLACE FUNCTION"); at != std::string::npos;
       at = functions.find("CREATE OR REPLACE FUNCTION", at + 1)) {
    ++defined;
  }
  CHECK(pg.scalar("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                  "WHERE n.nspname = 'public'") == std::to_string(defined));

  migrate(pg, "schema is up to date");
  CHECK(describe(pg, "public") == migrated);
}

TEST_CASE("a database whose schema other migration files made is refused with what to do" *
          doctest::timeout(60)) {
  PostgresServer pg;
  pg.execute("CREATE TABLE sandglass_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
             " applied_at timestamptz NOT NULL DEFAULT clock_timestamp());"
             "INSERT INTO sandglass_schema_migrations (version, name) VALUES (1, '001_queue.sql')");
  const std::string path = write_temp_file("cluster.toml", "[cluster]\nconninfo = \"" + pg.conninfo() + "\"\n");
  const RunResult r = run_sandglassd({"--config", path, "--migrate"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("its schema was made by migration 001_queue.sql (version 1), which this sandglassd "
                   "does not have") != std::string::npos);
  CHECK(r.err.find("run `sandglassd --migrate` on an empty database") != std::string::npos);
  CHECK(pg.scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'sandglass_jobs'") == "0");
}

}  // TEST_SUITE
