# Fails unless README.md contains examples/embedding.cpp and examples/coroutine_service.cpp word
# for word (the files the install test builds and runs).
file(READ "${SOURCE_DIR}/README.md" readme)
foreach(name embedding coroutine_service)
  file(READ "${SOURCE_DIR}/examples/${name}.cpp" example)
  string(FIND "${readme}" "${example}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md does not contain examples/${name}.cpp verbatim")
  endif()
endforeach()
