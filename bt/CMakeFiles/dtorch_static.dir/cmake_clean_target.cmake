file(REMOVE_RECURSE
  "libdtorch.a"
)
