# Fails unless README.md contains examples/embedding.cpp word for word (the file a test builds).
file(READ "${SOURCE_DIR}/README.md" readme)
file(READ "${SOURCE_DIR}/examples/embedding.cpp" example)
string(FIND "${readme}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/embedding.cpp verbatim")
endif()
