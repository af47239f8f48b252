# Fails unless each page shows its compiled examples word for word: README.md and
# docs/embedding.md show examples/embedding.cpp, docs/embedding.md shows
# examples/coroutine_service.cpp (the files the install test builds and runs).
#
#   cmake -DSOURCE_DIR=... -P check_examples_shown.cmake
set(pages_and_examples
    "README.md|embedding"
    "docs/embedding.md|embedding"
    "docs/embedding.md|coroutine_service")
foreach(pair IN LISTS pages_and_examples)
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 page)
  list(GET pair 1 name)
  file(READ "${SOURCE_DIR}/${page}" text)
  file(READ "${SOURCE_DIR}/examples/${name}.cpp" example)
  string(FIND "${text}" "${example}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${page} does not contain examples/${name}.cpp verbatim")
  endif()
endforeach()
