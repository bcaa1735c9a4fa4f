# CMake generated Testfile for 
# Source directory: /work/main/examples/server
# Build directory: /work/main/bt/examples/server
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[server_load]=] "sh" "-c" "command -v python3 >/dev/null || { echo 'server load test: skipped: no python3'; exit 77; }; exec python3 \"\$@\"" "sh" "/work/main/examples/server/load_test.py" "--server" "/work/main/bt/examples/server/dtorch_server" "--dir" "/work/main/bt/examples/server" "--clients" "16" "--requests" "2000")
set_tests_properties([=[server_load]=] PROPERTIES  LABELS "example;server" SKIP_RETURN_CODE "77" TIMEOUT "600" _BACKTRACE_TRIPLES "/work/main/examples/server/CMakeLists.txt;17;add_test;/work/main/examples/server/CMakeLists.txt;0;")
