file(REMOVE_RECURSE
  "libdtorch_test_support.a"
)
