"""Tool profiles: the YAML data that says where each tool keeps its caches and how to treat them."""
