# Turns the files MIGRATIONS names (NNN_name.sql, comma-separated, in MIGRATIONS_DIR) into
# OUTPUT, a C++ source defining sandglass::daemon::cluster::migrations() with each file as a raw
# string literal, in version order, and cluster_functions() with MIGRATIONS_DIR/functions.sql,
# so the schema ships inside sandglassd. Run at build time by daemon/CMakeLists.txt, which
# names the files it globbed.
#   cmake -DMIGRATIONS_DIR=daemon/cluster/migrations -DMIGRATIONS=001_schema.sql,002_x.sql \
#         -DOUTPUT=build/x.cpp -P embed_migrations.cmake
include("${CMAKE_CURRENT_LIST_DIR}/../../../cmake/embed_text.cmake")
string(REPLACE "," ";" files "${MIGRATIONS}")
list(SORT files)
sandglass_generated_preamble(body "daemon/cluster/migrations/ by embed_migrations.cmake")
string(APPEND body "#include \"daemon/cluster/migrations.hpp\"\n\n")
string(APPEND body "namespace sandglass::daemon::cluster {\n\nstd::span<const Migration> migrations() noexcept {\n")
string(APPEND body "  static const Migration kMigrations[] = {\n")
foreach(name IN LISTS files)
  string(SUBSTRING "${name}" 0 3 version)
  math(EXPR version "${version}")
  sandglass_raw_string(literal "${MIGRATIONS_DIR}/${name}" "sgsql")
  string(APPEND body "      {${version}, \"${name}\", ${literal}},\n")
endforeach()
string(APPEND body "  };\n  return kMigrations;\n}\n\n")
sandglass_raw_string(functions "${MIGRATIONS_DIR}/functions.sql" "sgsql")
string(APPEND body "std::string_view cluster_functions() noexcept {\n  return ${functions};\n}\n\n")
string(APPEND body "}  // namespace sandglass::daemon::cluster\n")
sandglass_write_generated("${OUTPUT}" "${body}")
