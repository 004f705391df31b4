package deploy_test

func cleanupBinaries() {}
