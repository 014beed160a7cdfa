from bench.make_samples import main

main()
