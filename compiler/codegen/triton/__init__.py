"""The CUDA code generator: every kernel of a graph becomes a ``@triton.jit`` function in one module.

* render: ``plan.py`` (template, launch configurations and index width of a kernel), ``emit.py``
  (expressions: the Triton table of the shared emitter), ``kernel.py`` (:class:`KernelSource`: a kernel's
  parameters, stores and the helpers its template uses), ``reductions.py`` (accumulators shared by the
  looped and split templates), ``templates/`` (one file per template: ``pointwise``, ``persistent``,
  ``looped``, ``split``), ``module.py`` (the generated module), ``shim.py`` (libdevice stand-ins for
  ``TRITON_INTERPRET=1``);
* build: ``build.py`` (write the module into the on-disk cache and import it);
* launch: ``launch.py`` (grid, configuration choice and autotuning, static launches, the interpreter
  fallback of a kernel that does not build);
* AOT workers: ``aot.py`` (the pool of compile worker processes, static CUDA launches) and ``worker.py``
  (the worker process itself, run as a script);
* ``generator.py``: :class:`~mend.compiler.codegen.triton.generator.TritonGenerator`, the generator the
  backend picks for CUDA graphs.
"""
