-- revision: 0032
-- Rendered by scripts/render_head_schema.py from the migrations; do not edit.

CREATE TABLE agents (
    id character varying(128) NOT NULL,
    org_id character varying(128),
    name character varying(256) NOT NULL,
    owner_user_id character varying(128),
    definition json NOT NULL,
    updated_at timestamp with time zone NOT NULL
);

CREATE TABLE alembic_version (
    version_num character varying(32) NOT NULL
);

CREATE TABLE approval_rules (
    id character varying(64) NOT NULL,
    org_id character varying(128),
    agent_id character varying(128) NOT NULL,
    tool_name character varying(256) NOT NULL,
    scope character varying(16) NOT NULL,
    run_id character varying(64),
    user_id character varying(128),
    "when" text,
    created_by character varying(128) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    from_request_id character varying(64),
    revoked_at timestamp with time zone,
    revoked_by character varying(128),
    uses integer DEFAULT 0 NOT NULL,
    last_used_at timestamp with time zone,
    suspended_at timestamp with time zone,
    suspended_reason text,
    mode character varying(16) DEFAULT 'enforce'::character varying NOT NULL
);

CREATE TABLE approval_votes (
    id integer NOT NULL,
    request_id character varying(64) NOT NULL,
    user_id character varying(128) NOT NULL,
    decision character varying(16) NOT NULL,
    via character varying(16),
    channel_identity character varying(256),
    reason text,
    created_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE approval_votes_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE approval_votes_id_seq OWNED BY approval_votes.id;

CREATE TABLE audit_chain_heads (
    chain character varying(128) NOT NULL,
    last_seq bigint NOT NULL,
    last_hash character varying(64) NOT NULL
);

CREATE TABLE channel_callbacks_seen (
    channel_id character varying(128) NOT NULL,
    dedupe_key character varying(512) NOT NULL,
    seen_at timestamp with time zone NOT NULL
);

CREATE TABLE channels (
    id character varying(128) NOT NULL,
    org_id character varying(128) NOT NULL,
    type character varying(32) NOT NULL,
    enabled boolean NOT NULL,
    config_encrypted text NOT NULL,
    "position" integer NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE confirmation_requests (
    id character varying(64) NOT NULL,
    run_id character varying(64) NOT NULL,
    tool_call_id character varying(128) NOT NULL,
    agent_id character varying(128) NOT NULL,
    requested_by character varying(128),
    org_id character varying(128),
    mode character varying(16) NOT NULL,
    channel_id character varying(128),
    approver_scope character varying(32) NOT NULL,
    agent_owner_id character varying(128),
    status character varying(16) NOT NULL,
    tool_name character varying(256) NOT NULL,
    args json NOT NULL,
    args_sha256 character varying(64) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    responded_at timestamp with time zone,
    responded_by character varying(128),
    responder_channel_identity character varying(256),
    reason text,
    delivery_ref json,
    context json,
    decided_via character varying(16),
    approvals_required integer DEFAULT 1 NOT NULL,
    allow_self_approval boolean DEFAULT true NOT NULL,
    approvals json,
    followup json,
    reminders_sent integer DEFAULT 0 NOT NULL,
    last_reminded_at timestamp with time zone,
    escalated_at timestamp with time zone,
    escalated_to json,
    escalation_refs json,
    unreachable text,
    edited_args json,
    edited_args_sha256 character varying(64),
    message text,
    root_run_id character varying(64)
);

CREATE TABLE connector_call_logs (
    id bigint NOT NULL,
    chain character varying(128) NOT NULL,
    seq bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    tool_name character varying(256) NOT NULL,
    connector character varying(128),
    agent_id character varying(128),
    user_id character varying(128),
    org_id character varying(128),
    run_id character varying(64),
    tool_call_id character varying(128),
    execution_path character varying(32),
    args_json text NOT NULL,
    args_sha256 character varying(64) NOT NULL,
    outcome character varying(16) NOT NULL,
    blocked_by character varying(256),
    detail text,
    result_chars bigint,
    result_sha256 character varying(64),
    latency_us bigint NOT NULL,
    prev_hash character varying(64) NOT NULL,
    row_hash character varying(64) NOT NULL,
    hash_v smallint DEFAULT 2 NOT NULL,
    approver text,
    request_id character varying(64),
    wait_us bigint,
    parent_session text,
    depth smallint,
    session_id text,
    acting_service character varying(128)
);

CREATE SEQUENCE connector_call_logs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE connector_call_logs_id_seq OWNED BY connector_call_logs.id;

CREATE TABLE limit_claims (
    id bigint NOT NULL,
    limit_key character varying(512) NOT NULL,
    call_key character varying(512) NOT NULL,
    kind character varying(16) NOT NULL,
    amount bigint NOT NULL,
    at double precision NOT NULL
);

CREATE SEQUENCE limit_claims_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE limit_claims_id_seq OWNED BY limit_claims.id;

CREATE TABLE oidc_identities (
    issuer character varying(512) NOT NULL,
    subject character varying(255) NOT NULL,
    user_id character varying(128) NOT NULL,
    email character varying(320),
    groups json NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    refused_at timestamp with time zone
);

CREATE TABLE oidc_logins (
    state character varying(128) NOT NULL,
    nonce character varying(128) NOT NULL,
    code_verifier character varying(128) NOT NULL,
    binding_sha256 character varying(64) NOT NULL,
    return_to character varying(512) NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE oidc_sessions (
    id_sha256 character varying(64) NOT NULL,
    user_id character varying(128) NOT NULL,
    issuer character varying(512) NOT NULL,
    subject character varying(255) NOT NULL,
    kind character varying(16) NOT NULL,
    csrf_token character varying(64) NOT NULL,
    refresh_token text,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    checked_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    ended_reason character varying(512)
);

CREATE TABLE orgs (
    id character varying(128) NOT NULL,
    name character varying(256) NOT NULL,
    read_only boolean NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE rate_limit_counters (
    key character varying(512) NOT NULL,
    window_start bigint NOT NULL,
    count integer NOT NULL
);

CREATE TABLE revoked_tokens (
    token_sha256 character varying(64) NOT NULL,
    user_id character varying(128) NOT NULL,
    revoked_by character varying(128),
    revoked_at timestamp with time zone NOT NULL
);

CREATE TABLE run_events (
    run_id character varying(64) NOT NULL,
    seq integer NOT NULL,
    type character varying(64) NOT NULL,
    data json NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE runs (
    id character varying(64) NOT NULL,
    agent_id character varying(128) NOT NULL,
    org_id character varying(128),
    user_id character varying(128),
    conversation_id character varying(128),
    engine character varying(32) NOT NULL,
    status character varying(32) NOT NULL,
    state_json text NOT NULL,
    answer text,
    error text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    fence bigint DEFAULT '0'::bigint NOT NULL,
    followed boolean DEFAULT false NOT NULL
);

CREATE TABLE session_facts (
    id bigint NOT NULL,
    session character varying(256) NOT NULL,
    kind character varying(16) NOT NULL,
    trusted boolean NOT NULL,
    source character varying(256) NOT NULL,
    call_id character varying(128),
    text text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE session_facts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE session_facts_id_seq OWNED BY session_facts.id;

CREATE TABLE tool_executions (
    run_id character varying(64) NOT NULL,
    tool_call_id character varying(128) NOT NULL,
    tool_name character varying(256) NOT NULL,
    args_sha256 character varying(64) NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    observation text,
    ok boolean
);

CREATE TABLE users (
    id character varying(128) NOT NULL,
    org_id character varying(128) NOT NULL,
    name character varying(256) NOT NULL,
    admin boolean NOT NULL,
    token_sha256 character varying(64),
    feishu_open_id character varying(128),
    slack_user_id character varying(128),
    wecom_userid character varying(128),
    created_at timestamp with time zone NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    declared boolean DEFAULT false NOT NULL,
    token_expires_at timestamp with time zone,
    service boolean DEFAULT false NOT NULL,
    telegram_user_id character varying(128),
    teams_aad_object_id character varying(128),
    discord_user_id character varying(128),
    email_address character varying(320),
    ntfy_topic character varying(128)
);

ALTER TABLE ONLY approval_votes ALTER COLUMN id SET DEFAULT nextval('approval_votes_id_seq'::regclass);

ALTER TABLE ONLY connector_call_logs ALTER COLUMN id SET DEFAULT nextval('connector_call_logs_id_seq'::regclass);

ALTER TABLE ONLY limit_claims ALTER COLUMN id SET DEFAULT nextval('limit_claims_id_seq'::regclass);

ALTER TABLE ONLY session_facts ALTER COLUMN id SET DEFAULT nextval('session_facts_id_seq'::regclass);

ALTER TABLE ONLY agents
    ADD CONSTRAINT agents_pkey PRIMARY KEY (id);

ALTER TABLE ONLY alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

ALTER TABLE ONLY approval_rules
    ADD CONSTRAINT approval_rules_pkey PRIMARY KEY (id);

ALTER TABLE ONLY approval_votes
    ADD CONSTRAINT approval_votes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY audit_chain_heads
    ADD CONSTRAINT audit_chain_heads_pkey PRIMARY KEY (chain);

ALTER TABLE ONLY channel_callbacks_seen
    ADD CONSTRAINT channel_callbacks_seen_pkey PRIMARY KEY (channel_id, dedupe_key);

ALTER TABLE ONLY channels
    ADD CONSTRAINT channels_pkey PRIMARY KEY (id);

ALTER TABLE ONLY confirmation_requests
    ADD CONSTRAINT confirmation_requests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY connector_call_logs
    ADD CONSTRAINT connector_call_logs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY limit_claims
    ADD CONSTRAINT limit_claims_pkey PRIMARY KEY (id);

ALTER TABLE ONLY oidc_identities
    ADD CONSTRAINT oidc_identities_pkey PRIMARY KEY (issuer, subject);

ALTER TABLE ONLY oidc_identities
    ADD CONSTRAINT oidc_identities_user_id_key UNIQUE (user_id);

ALTER TABLE ONLY oidc_logins
    ADD CONSTRAINT oidc_logins_pkey PRIMARY KEY (state);

ALTER TABLE ONLY oidc_sessions
    ADD CONSTRAINT oidc_sessions_pkey PRIMARY KEY (id_sha256);

ALTER TABLE ONLY orgs
    ADD CONSTRAINT orgs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY rate_limit_counters
    ADD CONSTRAINT rate_limit_counters_pkey PRIMARY KEY (key);

ALTER TABLE ONLY revoked_tokens
    ADD CONSTRAINT revoked_tokens_pkey PRIMARY KEY (token_sha256);

ALTER TABLE ONLY run_events
    ADD CONSTRAINT run_events_pkey PRIMARY KEY (run_id, seq);

ALTER TABLE ONLY runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY session_facts
    ADD CONSTRAINT session_facts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY tool_executions
    ADD CONSTRAINT tool_executions_pkey PRIMARY KEY (run_id, tool_call_id);

ALTER TABLE ONLY approval_votes
    ADD CONSTRAINT uq_approval_vote_person UNIQUE (request_id, user_id);

ALTER TABLE ONLY connector_call_logs
    ADD CONSTRAINT uq_call_log_chain_seq UNIQUE (chain, seq);

ALTER TABLE ONLY confirmation_requests
    ADD CONSTRAINT uq_confirmation_run_call UNIQUE (run_id, tool_call_id);

ALTER TABLE ONLY users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY users
    ADD CONSTRAINT users_token_sha256_key UNIQUE (token_sha256);

CREATE INDEX ix_agents_org_id ON agents USING btree (org_id);

CREATE INDEX ix_approval_rules_lookup ON approval_rules USING btree (org_id, agent_id, tool_name);

CREATE INDEX ix_call_log_org_agent ON connector_call_logs USING btree (org_id, agent_id);

CREATE INDEX ix_call_log_org_created ON connector_call_logs USING btree (org_id, created_at);

CREATE INDEX ix_call_log_org_session ON connector_call_logs USING btree (org_id, session_id);

CREATE INDEX ix_call_log_org_tool ON connector_call_logs USING btree (org_id, tool_name);

CREATE INDEX ix_call_log_org_user ON connector_call_logs USING btree (org_id, user_id);

CREATE INDEX ix_channels_org_id ON channels USING btree (org_id);

CREATE INDEX ix_confirmation_org_status ON confirmation_requests USING btree (org_id, status);

CREATE INDEX ix_confirmation_responded_at ON confirmation_requests USING btree (responded_at);

CREATE INDEX ix_confirmation_root_run ON confirmation_requests USING btree (root_run_id);

CREATE INDEX ix_confirmation_status_expires ON confirmation_requests USING btree (status, expires_at);

CREATE INDEX ix_limit_claims_call ON limit_claims USING btree (call_key);

CREATE INDEX ix_limit_claims_key_at ON limit_claims USING btree (limit_key, at);

CREATE INDEX ix_oidc_sessions_user_id ON oidc_sessions USING btree (user_id);

CREATE INDEX ix_runs_org_id ON runs USING btree (org_id);

CREATE INDEX ix_runs_status ON runs USING btree (status);

CREATE INDEX ix_session_facts_requests ON session_facts USING btree (session) WHERE ((kind)::text = 'request'::text);

CREATE INDEX ix_session_facts_session ON session_facts USING btree (session, id);

CREATE INDEX ix_users_discord_user_id ON users USING btree (discord_user_id);

CREATE INDEX ix_users_email_address ON users USING btree (email_address);

CREATE INDEX ix_users_feishu_open_id ON users USING btree (feishu_open_id);

CREATE INDEX ix_users_ntfy_topic ON users USING btree (ntfy_topic);

CREATE INDEX ix_users_org_id ON users USING btree (org_id);

CREATE INDEX ix_users_slack_user_id ON users USING btree (slack_user_id);

CREATE INDEX ix_users_teams_aad_object_id ON users USING btree (teams_aad_object_id);

CREATE INDEX ix_users_telegram_user_id ON users USING btree (telegram_user_id);

CREATE INDEX ix_users_wecom_userid ON users USING btree (wecom_userid);

ALTER TABLE ONLY agents
    ADD CONSTRAINT agents_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs(id);

ALTER TABLE ONLY channels
    ADD CONSTRAINT channels_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs(id);

ALTER TABLE ONLY oidc_identities
    ADD CONSTRAINT oidc_identities_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id);

ALTER TABLE ONLY oidc_sessions
    ADD CONSTRAINT oidc_sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id);

ALTER TABLE ONLY users
    ADD CONSTRAINT users_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs(id);

