"""The ground floor: what every layer of planc shares and that knows nothing of planc.

* `diagnostics`  the user-error family (`PlancError`, `UsageError`) and JSON-path helpers;
* `json_reader`  JSON documents read with the path of every value (`JsonNode`);
* `dtypes`       element types: names, sizes, numpy types;
* `progress`     progress lines and `-v` steps on standard error;
* `code_cache`   files of compiled code beside a package's bytecode.

It imports nothing else of planc (tests/test_layers.py).
"""
