BEGIN TRANSACTION;
CREATE TABLE audit_events (
	run_id VARCHAR(200) NOT NULL, 
	seq INTEGER NOT NULL, 
	cycle INTEGER NOT NULL, 
	kind VARCHAR(32) NOT NULL, 
	ts DOUBLE NOT NULL, 
	payload TEXT NOT NULL, 
	hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (run_id, seq)
)
 WITHOUT ROWID

;
INSERT INTO "audit_events" VALUES('v3-run',1,0,'run_started',1.79568737474734139436e+09,'{"budget":{"max_cost_usd":null,"max_cycles":4,"max_facts":10000,"max_invocations":null,"max_seconds":null,"max_tokens":null,"per_suggestor":{}},"initial_facts":[{"confidence":1.0,"content":{"i":0},"id":"n#0","key":"n","provenance":{"cycle":0,"parents":[],"proposal_id":"input/n/0","suggestor":"input"}}],"job":null,"run_id":"v3-run","suggestors":["counter"]}','0131da6a8d2ff3d7e1666c8ebb56e91fa8c00f91446f1c296582c4b29c00c2d0');
INSERT INTO "audit_events" VALUES('v3-run',2,1,'cycle_started',1.79568737476022553443e+09,'{"eligible":["counter"]}','56c16f826bd3f632e9c2fae53ba199f9538281f6e842f88128816c435fbb7ac4');
INSERT INTO "audit_events" VALUES('v3-run',3,1,'suggestor_executed',1.79568737476025748252e+09,'{"proposals":1,"suggestor":"counter","usage":[0,0,0.0]}','d4712e0dd3c1e6766c1d3e3cb07e51fafe071d3505d8c2eba20a60c62d4fee8f');
INSERT INTO "audit_events" VALUES('v3-run',4,1,'fact_promoted',1.79568737476030850408e+09,'{"confidence":1.0,"content":{"i":1,"note":"é"},"id":"n#1","key":"n","provenance":{"cycle":1,"parents":[],"proposal_id":"counter/1/0.0","suggestor":"counter"}}','5cb0721384ab3421e463233b97a39ae5a8fff91a51bf152586d8ba0c0a815029');
INSERT INTO "audit_events" VALUES('v3-run',5,2,'cycle_started',1.79568737476832747455e+09,'{"eligible":["counter"]}','3f2462749636dafe39fc120e05479c1d046bffbfda7359f1248a69d13ed331ef');
INSERT INTO "audit_events" VALUES('v3-run',6,2,'suggestor_executed',1.79568737476835894577e+09,'{"proposals":1,"suggestor":"counter","usage":[0,0,0.0]}','47a9289879a84a6939822d96c207caba2a07a02a8c069e744fc5834b12889476');
INSERT INTO "audit_events" VALUES('v3-run',7,2,'fact_promoted',1.79568737476837444306e+09,'{"confidence":1.0,"content":{"i":2,"note":"é"},"id":"n#2","key":"n","provenance":{"cycle":2,"parents":[],"proposal_id":"counter/2/0.0","suggestor":"counter"}}','457eafd2d6d579e91672552e2b65ce519c750a8bb9a2a0aa3fada5c6c4a34e39');
INSERT INTO "audit_events" VALUES('v3-run',8,3,'cycle_started',1.79568737476977634435e+09,'{"eligible":["counter"]}','a1bc634d9b960723b3951a8755e5bd8cf8e1eec39a54cf32751c59c58c413b8c');
INSERT INTO "audit_events" VALUES('v3-run',9,3,'suggestor_executed',1.79568737476980328556e+09,'{"proposals":1,"suggestor":"counter","usage":[0,0,0.0]}','44d7d67ef851ffc720244c43111fbb0aeb6340622749c692330647c40720e480');
INSERT INTO "audit_events" VALUES('v3-run',10,3,'fact_promoted',1.79568737476981616025e+09,'{"confidence":1.0,"content":{"i":3,"note":"é"},"id":"n#3","key":"n","provenance":{"cycle":3,"parents":[],"proposal_id":"counter/3/0.0","suggestor":"counter"}}','e20cac577d92b3698d2860154a9b8b1d170d83e7b7ec16eae75fe312438215c0');
INSERT INTO "audit_events" VALUES('v3-run',11,4,'cycle_started',1.79568737477573966976e+09,'{"eligible":["counter"]}','daa6c218d5edaf4606dfe066afac1c97f0251a19de9cfd87c8eb262f091ff04f');
INSERT INTO "audit_events" VALUES('v3-run',12,4,'suggestor_executed',1.79568737477576875682e+09,'{"proposals":1,"suggestor":"counter","usage":[0,0,0.0]}','60b1361adcc37407dbad57d8ab7ae1bb7349a27c99fa1ae5d64ef0d03c72f3e3');
INSERT INTO "audit_events" VALUES('v3-run',13,4,'fact_promoted',1.79568737477578401571e+09,'{"confidence":1.0,"content":{"i":4,"note":"é"},"id":"n#4","key":"n","provenance":{"cycle":4,"parents":[],"proposal_id":"counter/4/0.0","suggestor":"counter"}}','fa423e70a312e8066539747f20e6f7e781fe9336a812206bd982434ebdbdfd86');
INSERT INTO "audit_events" VALUES('v3-run',14,4,'stop_signal',1.79568737478514790532e+09,'{"cycles_executed":4,"kind":"cycle_budget_exhausted","limit":4}','2354f073e206e4b9b20dc4653b97071e1223b6634bb9d9309a9406e0df02477d');
INSERT INTO "audit_events" VALUES('v3-run',15,4,'run_stopped',1.79568737478523945808e+09,'{"budget_status":{"dimensions":{"cost_usd":{"limit":null,"percent":null,"used":0.0},"cycles":{"limit":4.0,"percent":100.0,"used":4.0},"facts":{"limit":10000.0,"percent":0.05,"used":5.0},"invocations":{"limit":null,"percent":null,"used":4.0},"seconds":{"limit":null,"percent":null,"used":0.037},"tokens":{"limit":null,"percent":null,"used":0.0}},"percent":100.0},"category":"budget","checkpoint_sha256":"e3d44dd0ed08c401f161a7c4f724ea2530352956b74b4144d190684ae432479e","cycles":4,"facts_count":5,"facts_root":"064379daf2b348c6738a1d862db54957696f3d1130e8aa01183886d413b78300","kind":"cycle_budget_exhausted","reason":{"cycles_executed":4,"kind":"cycle_budget_exhausted","limit":4},"usage":[0,0,0.0]}','a540ce0a8e06f73de68e4c6ea5d2f7f3122873babd62d42c7f1152c0da9861b3');
CREATE TABLE checkpoint_parts (
	run_id VARCHAR(200) NOT NULL, 
	part INTEGER NOT NULL, 
	data TEXT NOT NULL, 
	PRIMARY KEY (run_id, part)
);
CREATE TABLE checkpoints (
	run_id VARCHAR(200) NOT NULL, 
	cycle INTEGER NOT NULL, 
	created_at DOUBLE NOT NULL, 
	data TEXT NOT NULL, 
	PRIMARY KEY (run_id)
);
INSERT INTO "checkpoints" VALUES('v3-run',4,1.79568737480290365219e+09,'{"version":2,"run_id":"v3-run","suggestors":["counter"],"budget":{"max_cycles":4,"max_facts":10000,"max_tokens":null,"max_seconds":null,"max_cost_usd":null,"max_invocations":null,"per_suggestor":{}},"facts":{"count":5,"chunks":"7ff720a200994657e03cc550b5d1eeb1c9a25fdbee03ae770dc5a63771afcdee"},"facts_count":5,"cycle":4,"usage":[0,0,0.0],"invocations":4,"invocations_by":{"counter":4},"history":["counter","counter","counter","counter"],"streaks":{},"last_error":null,"last_suggestors":["counter"],"dirty":["n"],"rejected":[],"pending_signals":[],"merge_effects":[],"merge_pos":[0,0],"cycle_new":["n#4"],"pending_gate":null,"gates_opened":0,"elapsed_ms":0,"continuations":[],"merkle":[5,[[4,"6079dc9cfacd50fe5906395a16a9776cb48016a327d3f55eefc5533c48091af4"],[1,"57b30782687eb708a74cb6a82e12befcd176140b4802c1a2d49304a8b97ff760"]]]}');
CREATE TABLE converge_meta (
	"key" VARCHAR(64) NOT NULL, 
	value VARCHAR(255) NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO "converge_meta" VALUES('schema_version','3');
INSERT INTO "converge_meta" VALUES('ledger_head','7:f4eac21b12815fa6d79180f584b89bdaf1ae41b474fe8680231818e7b04a5980');
CREATE TABLE fact_chunks (
	run_id VARCHAR(200) NOT NULL, 
	first INTEGER NOT NULL, 
	count INTEGER NOT NULL, 
	data TEXT NOT NULL, 
	digest VARCHAR(64) NOT NULL, 
	PRIMARY KEY (run_id, first)
);
INSERT INTO "fact_chunks" VALUES('v3-run',0,1,'[["n#0","n",{"i":0},1.0,"input",0,"input/n/0",[]]]','9063de8f1f604bdde9eddd116da8a968b5413fb2fd911080753cacc1d6e291f9');
INSERT INTO "fact_chunks" VALUES('v3-run',1,1,'[["n#1","n",{"i":1,"note":"é"},1.0,"counter",1,"counter/1/0.0",[]]]','f55668650984e5e84a831b5fdaf443aad6bcde70ed31bb11c6264c111ee19a21');
INSERT INTO "fact_chunks" VALUES('v3-run',2,1,'[["n#2","n",{"i":2,"note":"é"},1.0,"counter",2,"counter/2/0.0",[]]]','f5a8428d8dc1326c9b72385783c8f1a65d249f90c63a7c535da75522edc0430f');
INSERT INTO "fact_chunks" VALUES('v3-run',3,1,'[["n#3","n",{"i":3,"note":"é"},1.0,"counter",3,"counter/3/0.0",[]]]','895115bb500afee205b39918766cc4f83bbba5a557679aff36c20516a364c1f6');
INSERT INTO "fact_chunks" VALUES('v3-run',4,1,'[["n#4","n",{"i":4,"note":"é"},1.0,"counter",4,"counter/4/0.0",[]]]','c55ad01987df1aaadc2ff8867e8c379b8d19effa7ba3d90fb6521b8f9f93e6e7');
CREATE TABLE gates (
	gate_id VARCHAR(200) NOT NULL, 
	run_id VARCHAR(200) NOT NULL, 
	proposal_id TEXT NOT NULL, 
	proposal TEXT NOT NULL, 
	suggestor VARCHAR(200) NOT NULL, 
	summary TEXT NOT NULL, 
	cycle INTEGER NOT NULL, 
	policy VARCHAR(200) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	opened_at DOUBLE NOT NULL, 
	expires_at DOUBLE, 
	on_timeout VARCHAR(16) NOT NULL, 
	decided_by TEXT, 
	decided_at DOUBLE, 
	reason TEXT, 
	extra TEXT NOT NULL, 
	PRIMARY KEY (gate_id)
);
CREATE TABLE ledger (
	seq INTEGER NOT NULL, 
	run_id VARCHAR(200) NOT NULL, 
	last_seq INTEGER NOT NULL, 
	head VARCHAR(64) NOT NULL, 
	hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (seq)
);
INSERT INTO "ledger" VALUES(1,'v3-run',1,'0131da6a8d2ff3d7e1666c8ebb56e91fa8c00f91446f1c296582c4b29c00c2d0','02c879a760853c2b7ca3c72322604047ab7d01f5a55b471389909be6acffe7dd');
INSERT INTO "ledger" VALUES(2,'v3-run',4,'5cb0721384ab3421e463233b97a39ae5a8fff91a51bf152586d8ba0c0a815029','5c3d321ec4ed91772b88a002d2c2e5bc62be15bc5db99bc93b958014d060766f');
INSERT INTO "ledger" VALUES(3,'v3-run',7,'457eafd2d6d579e91672552e2b65ce519c750a8bb9a2a0aa3fada5c6c4a34e39','b41484ad0230460345e0dbc93339a218a380e10c80dadcdb64e226ec1a05b941');
INSERT INTO "ledger" VALUES(4,'v3-run',10,'e20cac577d92b3698d2860154a9b8b1d170d83e7b7ec16eae75fe312438215c0','f89022c785cb8e3189edde7103c88d06f6524cd281d7500d1624a3d38111eddc');
INSERT INTO "ledger" VALUES(5,'v3-run',13,'fa423e70a312e8066539747f20e6f7e781fe9336a812206bd982434ebdbdfd86','24416c542e776999c402e3710b255ca1be13be0498a5896fe0eb980945ed86ee');
INSERT INTO "ledger" VALUES(6,'v3-run',14,'2354f073e206e4b9b20dc4653b97071e1223b6634bb9d9309a9406e0df02477d','5c3f1ac55b283b61b10b7f2dbf4e248c47a8cf428fb4880e45131dbe4fa6175a');
INSERT INTO "ledger" VALUES(7,'v3-run',15,'a540ce0a8e06f73de68e4c6ea5d2f7f3122873babd62d42c7f1152c0da9861b3','f4eac21b12815fa6d79180f584b89bdaf1ae41b474fe8680231818e7b04a5980');
CREATE TABLE runs (
	run_id VARCHAR(200) NOT NULL, 
	job VARCHAR(200), 
	job_spec TEXT, 
	suggestors TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	pid INTEGER, 
	hostname VARCHAR(255), 
	started_at DOUBLE NOT NULL, 
	ended_at DOUBLE, 
	stop_kind VARCHAR(64), 
	category VARCHAR(32), 
	reason TEXT, 
	cycles INTEGER NOT NULL, 
	facts_count INTEGER NOT NULL, 
	facts_root VARCHAR(64), 
	usage TEXT, 
	duration_ms INTEGER, 
	chain VARCHAR(16) NOT NULL, 
	head_hash VARCHAR(64) NOT NULL, 
	last_seq INTEGER NOT NULL, 
	parent_run_id VARCHAR(200), 
	PRIMARY KEY (run_id)
);
INSERT INTO "runs" VALUES('v3-run',NULL,NULL,'["counter"]','stopped',10123,'vm',1.79568737474726772308e+09,1.79568737478520369524e+09,'cycle_budget_exhausted','budget','{"cycles_executed":4,"kind":"cycle_budget_exhausted","limit":4}',4,5,'064379daf2b348c6738a1d862db54957696f3d1130e8aa01183886d413b78300','{"cost_usd":0.0,"input_tokens":0,"output_tokens":0}',37,'sha256','a540ce0a8e06f73de68e4c6ea5d2f7f3122873babd62d42c7f1152c0da9861b3',15,NULL);
CREATE INDEX ix_runs_job_started ON runs (job, started_at);
CREATE INDEX ix_runs_kind_started ON runs (stop_kind, started_at);
CREATE INDEX ix_runs_status_started ON runs (status, started_at);
CREATE INDEX ix_runs_started ON runs (started_at);
CREATE INDEX ix_runs_category_started ON runs (category, started_at);
CREATE INDEX ix_gates_status_opened ON gates (status, opened_at);
CREATE INDEX ix_gates_opened ON gates (opened_at);
CREATE INDEX ix_gates_run ON gates (run_id);
CREATE INDEX ix_ledger_run_seq ON ledger (run_id, seq);
COMMIT;
