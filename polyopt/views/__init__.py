"""What a researcher looks at: ``stats`` (flops, traffic, intensity, footprints, roofline),
``show`` (the loop tree and the dependence graph, as text or Graphviz) and ``roofplot`` (a
roofline chart)."""
