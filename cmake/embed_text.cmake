# Helpers for build-time scripts (cmake -P) that ship text files inside a binary as C++ raw
# string literals: the status page (daemon/ui/embed_assets.cmake) and the cluster schema
# (daemon/cluster/migrations/embed_migrations.cmake). Include it from such a script.
#
# sandglass_raw_string(<var> <file> <delimiter>): sets <var> to the file's whole content as the
# literal R"<delimiter>(...)<delimiter>"; a fatal error names the file if its content contains
# the closing sequence and so cannot be one.
function(sandglass_raw_string var file delimiter)
  file(READ "${file}" content)
  string(FIND "${content}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains )${delimiter}\" and cannot be a raw string")
  endif()
  set(${var} "R\"${delimiter}(${content})${delimiter}\"" PARENT_SCOPE)
endfunction()

# sandglass_generated_preamble(<var> <source>): sets <var> to the first lines of a generated C++
# source made from <source>: a "do not edit" line, and a pragma that lets a literal exceed the
# 65,536 characters the standard asks compilers to support (GCC and Clang take any length;
# -Wpedantic, and so -Werror, would refuse the file: functions.sql is longer than that).
function(sandglass_generated_preamble var source)
  set(${var} "// Generated from ${source}; do not edit.
#pragma GCC diagnostic ignored \"-Woverlength-strings\"
" PARENT_SCOPE)
endfunction()

# sandglass_write_generated(<output> <body>): writes <body> to <output> only when it differs,
# so that unchanged inputs recompile nothing.
function(sandglass_write_generated output body)
  if(EXISTS "${output}")
    file(READ "${output}" old)
    if(old STREQUAL body)
      return()
    endif()
  endif()
  file(WRITE "${output}" "${body}")
endfunction()
